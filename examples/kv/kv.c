/*
 * kv: a key-value store actor. Each actor (/actor/kv/<name>) is one store,
 * kept in its own SQLite database:
 *
 *   kv(k TEXT PRIMARY KEY, v BLOB NOT NULL, updated INTEGER)  -- updated: ms since epoch
 *
 * Requests (the path is what follows /actor/kv/<name>; keys are the rest of
 * the path, percent-decoded, and may contain '/'; keys starting with '_' are
 * reserved):
 *
 *   PUT /<key>        body = value; 201 when new, 200 when replaced
 *   GET /<key>        the value (HEAD: same without body); 404 "no such key"
 *   DELETE /<key>     204, or 404
 *   GET /             keys in order, one per line; query: prefix=<p>,
 *                     after=<key> (paging), limit=<n> (default 100, max 1000)
 *   GET /?count       the number of keys (honours prefix=); also GET /_count
 *   POST /_batch      body: lines `key=value`, applied in one transaction;
 *                     a malformed line rolls everything back: 400
 *
 * Values only ever reach SQL as bound parameters (`?`), never by building
 * SQL text out of them.
 */
#include "../sdk/wasmkeep.h"

#define DEFAULT_LIMIT 100
#define MAX_LIMIT 1000

/* Milliseconds since the Unix epoch, computed by SQLite (there is no clock
 * import in the actor world). */
#define NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

int wk_on_init(wk_str *err) {
  wk_sql_error e;
  if (!wk_exec(WK_S("CREATE TABLE IF NOT EXISTS kv ("
                    "k TEXT PRIMARY KEY, v BLOB NOT NULL, updated INTEGER)"),
               0, 0, 0, &e)) {
    *err = e.message;
    return 1;
  }
  return 0;
}

static void fail_sql(wk_response *resp, const wk_sql_error *e) {
  wk_buf b = {0};
  wk_buf_str(&b, e->code);
  wk_buf_cstr(&b, ": ");
  wk_buf_str(&b, e->message);
  wk_buf_char(&b, '\n');
  wk_respond_text(resp, 500, wk_buf_as_str(&b));
}

/* Keys: non-empty, and not starting with '_' (that is where /_count and
 * /_batch live). */
static int valid_key(wk_str k) { return k.len > 0 && k.ptr[0] != '_'; }

/* Stores one key. Returns 1 and sets *created, or 0 and fills *e.
 * INSERT ... DO NOTHING changes one row exactly when the key is new; if it
 * changed none, the key exists and we UPDATE it. (Events of one actor never
 * overlap, so nothing can come between the two statements.) */
static int put(wk_str key, wk_bytes value, int *created, wk_sql_error *e) {
  wk_exec_result r;
  wk_value params[2] = {WK_VALUE_TEXT(key), WK_VALUE_BLOB(value)};
  if (!wk_exec(WK_S("INSERT INTO kv (k, v, updated) VALUES (?, ?, " NOW_MS ") "
                    "ON CONFLICT (k) DO NOTHING"),
               params, 2, &r, e))
    return 0;
  *created = r.changes == 1;
  if (*created) return 1;
  wk_value upd[2] = {WK_VALUE_BLOB(value), WK_VALUE_TEXT(key)};
  return wk_exec(WK_S("UPDATE kv SET v = ?, updated = " NOW_MS " WHERE k = ?"),
                 upd, 2, 0, e);
}

/* A GLOB pattern matching keys that start with `prefix`: the GLOB wildcards
 * in the prefix are escaped by bracketing them. GLOB (unlike LIKE) is
 * case-sensitive and can use the primary key index for a prefix. */
static wk_str prefix_glob(wk_str prefix) {
  wk_buf b = {0};
  for (size_t i = 0; i < prefix.len; i++) {
    char c = prefix.ptr[i];
    if (c == '*' || c == '?' || c == '[') {
      char esc[3] = {'[', c, ']'};
      wk_buf_bytes(&b, esc, 3);
    } else {
      wk_buf_char(&b, c);
    }
  }
  wk_buf_char(&b, '*');
  return wk_buf_as_str(&b);
}

static void count_keys(wk_response *resp, wk_str query) {
  wk_str prefix = WK_S("");
  wk_query_param(query, WK_S("prefix"), &prefix);
  wk_value p = WK_VALUE_TEXT(prefix_glob(prefix));
  wk_exec_result r;
  wk_sql_error e;
  if (!wk_exec(WK_S("SELECT count(*) FROM kv WHERE k GLOB ?"), &p, 1, &r, &e)) {
    fail_sql(resp, &e);
    return;
  }
  wk_buf b = {0};
  wk_buf_i64(&b, wk_first_integer(&r, 0));
  wk_buf_char(&b, '\n');
  wk_respond_text(resp, 200, wk_buf_as_str(&b));
}

static void list_keys(wk_response *resp, wk_str query) {
  wk_str prefix = WK_S(""), after = WK_S(""), limit_s;
  uint64_t limit = DEFAULT_LIMIT;
  wk_query_param(query, WK_S("prefix"), &prefix);
  wk_query_param(query, WK_S("after"), &after);
  if (wk_query_param(query, WK_S("limit"), &limit_s) &&
      (!wk_parse_u64(limit_s, &limit) || limit > MAX_LIMIT)) {
    wk_respond_text(resp, 400, WK_S("limit must be a number from 0 to 1000\n"));
    return;
  }
  /* `k > ''` holds for every non-empty key, so no `after` needs no branch. */
  wk_value params[3] = {WK_VALUE_TEXT(prefix_glob(prefix)), WK_VALUE_TEXT(after),
                        WK_VALUE_INT((int64_t)limit)};
  wk_exec_result r;
  wk_sql_error e;
  if (!wk_exec(WK_S("SELECT k FROM kv WHERE k GLOB ? AND k > ? ORDER BY k LIMIT ?"),
               params, 3, &r, &e)) {
    fail_sql(resp, &e);
    return;
  }
  wk_buf b = {0};
  wk_buf_bytes(&b, "", 0);
  for (size_t i = 0; i < r.rows.len; i++) {
    wk_buf_value(&b, &r.rows.ptr[i].ptr[0]);
    wk_buf_char(&b, '\n');
  }
  wk_respond_text(resp, 200, wk_buf_as_str(&b));
}

static void get_key(wk_response *resp, wk_str key, int with_body) {
  wk_value p = WK_VALUE_TEXT(key);
  wk_exec_result r;
  wk_sql_error e;
  if (!wk_exec(WK_S("SELECT v, updated FROM kv WHERE k = ?"), &p, 1, &r, &e)) {
    fail_sql(resp, &e);
    return;
  }
  if (r.rows.len == 0) {
    wk_respond_text(resp, 404, WK_S("no such key\n"));
    return;
  }
  const wk_value *v = &r.rows.ptr[0].ptr[0];
  wk_bytes body = v->tag == WK_BLOB ? v->val.blob
                : v->tag == WK_TEXT ? wk_str_bytes(v->val.text)
                                    : (wk_bytes){0, 0};
  wk_buf updated = {0};
  wk_buf_value(&updated, &r.rows.ptr[0].ptr[1]);
  wk_header *h = wk_alloc(2 * sizeof *h, 4);
  h[0] = (wk_header){WK_S("content-type"), WK_S("application/octet-stream")};
  h[1] = (wk_header){WK_S("x-kv-updated"), wk_buf_as_str(&updated)};
  resp->status = 200;
  resp->headers = (wk_headers){h, 2};
  resp->body = with_body ? body : (wk_bytes){0, 0};
}

static void delete_key(wk_response *resp, wk_str key) {
  wk_value p = WK_VALUE_TEXT(key);
  wk_exec_result r;
  wk_sql_error e;
  if (!wk_exec(WK_S("DELETE FROM kv WHERE k = ?"), &p, 1, &r, &e)) {
    fail_sql(resp, &e);
    return;
  }
  if (r.changes == 0)
    wk_respond_text(resp, 404, WK_S("no such key\n"));
  else
    wk_respond(resp, 204, WK_S(""), (wk_bytes){0, 0});
}

static void put_key(wk_response *resp, wk_str key, wk_bytes value) {
  int created;
  wk_sql_error e;
  if (!put(key, value, &created, &e)) {
    fail_sql(resp, &e);
    return;
  }
  wk_respond_text(resp, created ? 201 : 200,
                  created ? WK_S("created\n") : WK_S("replaced\n"));
}

/* Rolls back the batch and answers `status` with `msg`, prefixed by the line
 * number when there is one. */
static void batch_fail(wk_response *resp, uint16_t status, size_t line, wk_str msg) {
  wk_exec(WK_S("ROLLBACK"), 0, 0, 0, 0);
  wk_buf b = {0};
  if (line) {
    wk_buf_cstr(&b, "line ");
    wk_buf_u64(&b, line);
    wk_buf_cstr(&b, ": ");
  }
  wk_buf_str(&b, msg);
  wk_buf_cstr(&b, "; nothing stored\n");
  wk_respond_text(resp, status, wk_buf_as_str(&b));
}

/* POST /_batch: every `key=value` line or none. The transaction is plain SQL
 * through exec; leaving it open would make the host roll it back and fail the
 * event, so every way out either COMMITs or ROLLBACKs. */
static void batch(wk_response *resp, wk_bytes body) {
  wk_sql_error e;
  if (!wk_exec(WK_S("BEGIN"), 0, 0, 0, &e)) {
    fail_sql(resp, &e);
    return;
  }
  wk_str rest = wk_bytes_str(body);
  size_t line_no = 0, stored = 0;
  while (rest.len) {
    size_t nl = wk_find(rest, '\n');
    wk_str line = wk_slice(rest, 0, nl);
    rest = wk_slice(rest, nl + 1, rest.len);
    line_no++;
    if (line.len && line.ptr[line.len - 1] == '\r') line.len--;
    if (line.len == 0) continue; /* blank lines are allowed */
    size_t eq = wk_find(line, '=');
    if (eq == line.len) {
      batch_fail(resp, 400, line_no, WK_S("expected key=value"));
      return;
    }
    wk_str key = wk_slice(line, 0, eq);
    if (!valid_key(key)) {
      batch_fail(resp, 400, line_no, WK_S("empty or reserved key"));
      return;
    }
    int created;
    if (!put(key, wk_str_bytes(wk_slice(line, eq + 1, line.len)), &created, &e)) {
      batch_fail(resp, 500, line_no, e.message);
      return;
    }
    stored++;
  }
  if (!wk_exec(WK_S("COMMIT"), 0, 0, 0, &e)) {
    batch_fail(resp, 500, 0, e.message);
    return;
  }
  wk_buf b = {0};
  wk_buf_u64(&b, stored);
  wk_buf_cstr(&b, " stored\n");
  wk_respond_text(resp, 200, wk_buf_as_str(&b));
}

void wk_on_request(const wk_request *req, wk_response *resp) {
  wk_str m = req->method;
  int get = wk_eq(m, WK_S("GET")), head = wk_eq(m, WK_S("HEAD"));
  wk_str key = wk_percent_decode(wk_slice(req->path, 1, req->path.len));

  if (req->path.len <= 1) { /* "/" (or "" should a host send that) */
    if (!get && !head) {
      wk_respond_not_allowed(resp, WK_S("GET, HEAD"));
      return;
    }
    wk_str unused;
    if (wk_query_param(req->query, WK_S("count"), &unused))
      count_keys(resp, req->query);
    else
      list_keys(resp, req->query);
    if (head) resp->body = (wk_bytes){0, 0};
    return;
  }
  if (wk_eq(key, WK_S("_count"))) {
    if (!get && !head) {
      wk_respond_not_allowed(resp, WK_S("GET, HEAD"));
      return;
    }
    count_keys(resp, req->query);
    if (head) resp->body = (wk_bytes){0, 0};
    return;
  }
  if (wk_eq(key, WK_S("_batch"))) {
    if (!wk_eq(m, WK_S("POST"))) {
      wk_respond_not_allowed(resp, WK_S("POST"));
      return;
    }
    batch(resp, req->body);
    return;
  }
  if (!valid_key(key)) {
    wk_respond_text(resp, 400, WK_S("keys starting with '_' are reserved\n"));
    return;
  }
  if (get || head)
    get_key(resp, key, get);
  else if (wk_eq(m, WK_S("PUT")))
    put_key(resp, key, req->body);
  else if (wk_eq(m, WK_S("DELETE")))
    delete_key(resp, key);
  else
    wk_respond_not_allowed(resp, WK_S("GET, HEAD, PUT, DELETE"));
}
