/*
 * chat: a room. Each actor (/actor/chat/<room>) is one room, and every
 * message a client sends on a WebSocket to the room goes to every socket of
 * the room, the sender's own included, as it was sent (text as text, binary
 * as binary). The room keeps what it received in its SQLite database:
 *
 *   messages(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, body BLOB NOT NULL)
 *
 * Requests (the path is what follows /actor/chat/<room>):
 *
 *   WebSocket  /           joins the room
 *   GET, HEAD  /           the number of messages the room has received
 *   GET        /history    its last text messages, oldest first, one per
 *                          line; query: limit=<n> (default 100, max 1000),
 *                          and at most 4 MiB of them (the newest that fit)
 *   otherwise  405
 *
 * Messages go out in the order the room's events ran (one at a time), so
 * every client sees one order, wherever it connected. A message is stored
 * before it goes out: a client that saw it can count on it being in the
 * history, also after the room hibernated or moved to another node.
 */
#include "../sdk/wasmkeep.h"

#define DEFAULT_LIMIT 100
#define MAX_LIMIT 1000
/* Most bytes of messages in one history answer: the newest that fit. */
#define MAX_HISTORY_BYTES (4 * 1024 * 1024)

int wk_on_init(wk_str *err) {
  wk_sql_error e;
  if (!wk_exec(WK_S("CREATE TABLE IF NOT EXISTS messages ("
                    "id INTEGER PRIMARY KEY, kind TEXT NOT NULL, body BLOB NOT NULL)"),
               0, 0, 0, &e)) {
    *err = e.message;
    return 1;
  }
  return 0;
}

void wk_on_websocket_message(uint64_t conn, const wk_ws_message *msg) {
  (void)conn;
  int text = msg->tag == WK_WS_TEXT;
  wk_bytes body = text ? wk_str_bytes(msg->val.text) : msg->val.binary;
  wk_value params[2] = {WK_VALUE_TEXT(text ? WK_S("text") : WK_S("binary")),
                        WK_VALUE_BLOB(body)};
  wk_sql_error e;
  if (!wk_exec(WK_S("INSERT INTO messages (kind, body) VALUES (?, ?)"), params, 2, 0, &e)) {
    /* Not stored, so not sent: nobody sees a message the history lacks. */
    wk_log(WK_ERROR, e.message);
    return;
  }
  wk_conns conns = wk_ws_connections();
  for (size_t i = 0; i < conns.len; i++) {
    wk_str err;
    /* A socket closed since the list was made is not an error of the room. */
    (void)wk_ws_send(conns.ptr[i], msg, &err);
  }
}

/* limit=<n> from the query, within 1..MAX_LIMIT; DEFAULT_LIMIT otherwise. */
static int64_t limit_of(wk_str query) {
  wk_str key = WK_S("limit=");
  for (size_t i = 0; i + key.len <= query.len; i++) {
    if ((i == 0 || query.ptr[i - 1] == '&') &&
        wk_eq((wk_str){query.ptr + i, key.len}, key)) {
      int64_t n = 0;
      size_t j = i + key.len;
      for (; j < query.len && query.ptr[j] >= '0' && query.ptr[j] <= '9'; j++) {
        n = n * 10 + (query.ptr[j] - '0');
        if (n > MAX_LIMIT) return MAX_LIMIT;
      }
      return n > 0 ? n : DEFAULT_LIMIT;
    }
  }
  return DEFAULT_LIMIT;
}

static void answer_history(const wk_request *req, wk_response *resp) {
  wk_exec_result r;
  wk_sql_error e;
  wk_value params[1] = {WK_VALUE_INT(limit_of(req->query))};
  if (!wk_exec(WK_S("SELECT body FROM (SELECT id, body FROM messages WHERE kind = 'text' "
                    "ORDER BY id DESC LIMIT ?) ORDER BY id"),
               params, 1, &r, &e)) {
    wk_respond_text(resp, 500, e.message);
    return;
  }
  size_t first = r.rows.len, total = 0;
  while (first > 0) {
    const wk_value *v = &r.rows.ptr[first - 1].ptr[0];
    size_t len = (v->tag == WK_BLOB ? v->val.blob.len : v->val.text.len) + 1;
    if (total + len > MAX_HISTORY_BYTES) break;
    total += len;
    first--;
  }
  wk_buf b = {0};
  for (size_t i = first; i < r.rows.len; i++) {
    const wk_value *v = &r.rows.ptr[i].ptr[0];
    if (v->tag == WK_BLOB) wk_buf_bytes(&b, v->val.blob.ptr, v->val.blob.len);
    else if (v->tag == WK_TEXT) wk_buf_str(&b, v->val.text);
    wk_buf_char(&b, '\n');
  }
  wk_respond_text(resp, 200, wk_buf_as_str(&b));
}

void wk_on_request(const wk_request *req, wk_response *resp) {
  int is_head = wk_eq(req->method, WK_S("HEAD"));
  int is_get = is_head || wk_eq(req->method, WK_S("GET"));
  int at_root = req->path.len == 0 || wk_eq(req->path, WK_S("/"));
  if (is_get && wk_eq(req->path, WK_S("/history"))) {
    answer_history(req, resp);
    return;
  }
  if (is_get && at_root) {
    wk_exec_result r;
    wk_sql_error e;
    if (!wk_exec(WK_S("SELECT count(*) FROM messages"), 0, 0, &r, &e)) {
      wk_respond_text(resp, 500, e.message);
      return;
    }
    wk_buf b = {0};
    wk_buf_i64(&b, wk_first_integer(&r, 0));
    wk_respond_text(resp, 200, is_head ? WK_S("") : wk_buf_as_str(&b));
    return;
  }
  wk_respond_not_allowed(resp, WK_S("GET, HEAD"));
}
