/*
 * reminder: an actor with an alarm. Each actor name under
 * /actor/reminder/<name> is one reminder that counts how many times it went
 * off, in its own SQLite database.
 *
 *   POST ?in=<seconds>  -> sets (or moves) its alarm that many whole seconds
 *                          ahead, answers the due time in ms since the epoch
 *   GET, HEAD           -> answers how many times the alarm fired (0 first)
 *   otherwise           -> 405 (a POST without a whole number `in`: 400)
 *
 * An actor has no clock of its own: the time comes from SQLite's, on the
 * node that runs the event. on-alarm adds one to the count; the alarm is
 * gone once it fired, until the next POST.
 */
#include "../sdk/wasmkeep.h"

int wk_on_init(wk_str *err) {
  wk_sql_error e;
  /* The CHECK keeps the table to a single row. */
  if (!wk_exec(WK_S("CREATE TABLE IF NOT EXISTS fired ("
                    "id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)"),
               0, 0, 0, &e)) {
    *err = e.message;
    return 1;
  }
  return 0;
}

int wk_on_alarm(wk_str *err) {
  wk_sql_error e;
  if (!wk_exec(WK_S("INSERT INTO fired VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET n = n + 1"), 0,
               0, 0, &e)) {
    *err = e.message;
    return 1;
  }
  return 0;
}

static void answer_number(wk_response *resp, int64_t n, int with_body) {
  wk_buf b = {0};
  wk_buf_i64(&b, n);
  wk_respond_text(resp, 200, with_body ? wk_buf_as_str(&b) : WK_S(""));
}

/* Seconds of at most ten years, whole. */
#define MAX_IN_SECONDS 315360000u

static void set_reminder(const wk_request *req, wk_response *resp) {
  wk_str in;
  uint64_t seconds;
  if (!wk_query_param(req->query, WK_S("in"), &in) || !wk_parse_u64(in, &seconds) ||
      seconds > MAX_IN_SECONDS) {
    wk_respond_text(resp, 400, WK_S("give ?in=<seconds>, a whole number up to 315360000\n"));
    return;
  }
  wk_exec_result r;
  wk_sql_error e;
  if (!wk_exec(WK_S("SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)"), 0, 0, &r, &e)) {
    wk_respond_text(resp, 500, e.message);
    return;
  }
  int64_t now = wk_first_integer(&r, -1);
  uint64_t due = (uint64_t)now + seconds * 1000;
  wk_str err;
  if (now < 0 || !wk_alarm_set(due, &err)) {
    wk_respond_text(resp, 500, now < 0 ? WK_S("no clock") : err);
    return;
  }
  answer_number(resp, (int64_t)due, 1);
}

void wk_on_request(const wk_request *req, wk_response *resp) {
  int is_head = wk_eq(req->method, WK_S("HEAD"));
  if (wk_eq(req->method, WK_S("POST"))) {
    set_reminder(req, resp);
  } else if (is_head || wk_eq(req->method, WK_S("GET"))) {
    wk_exec_result r;
    wk_sql_error e;
    if (!wk_exec(WK_S("SELECT n FROM fired WHERE id = 1"), 0, 0, &r, &e)) {
      wk_respond_text(resp, 500, e.message);
      return;
    }
    int64_t n = wk_first_integer(&r, -1);
    answer_number(resp, n < 0 ? 0 : n, !is_head);
  } else {
    wk_respond_not_allowed(resp, WK_S("GET, HEAD, POST"));
  }
}
