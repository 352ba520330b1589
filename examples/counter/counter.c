/*
 * counter: the smallest useful WasmKeep actor. Each actor instance (one per
 * name under /actor/counter/<name>) keeps one number in its own SQLite
 * database.
 *
 *   POST       -> increments, answers the new count
 *   GET, HEAD  -> answers the current count (0 before the first POST)
 *   otherwise  -> 405
 */
#include "../sdk/wasmkeep.h"

int wk_on_init(wk_str *err) {
  wk_sql_error e;
  /* The CHECK keeps the table to a single row. */
  if (!wk_exec(WK_S("CREATE TABLE IF NOT EXISTS counter ("
                    "id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)"),
               0, 0, 0, &e)) {
    *err = e.message;
    return 1;
  }
  return 0;
}

static void answer_count(wk_response *resp, int64_t n, int with_body) {
  wk_buf b = {0};
  wk_buf_i64(&b, n);
  wk_respond_text(resp, 200, with_body ? wk_buf_as_str(&b) : WK_S(""));
}

void wk_on_request(const wk_request *req, wk_response *resp) {
  wk_exec_result r;
  wk_sql_error e;
  int is_head = wk_eq(req->method, WK_S("HEAD"));

  if (wk_eq(req->method, WK_S("POST"))) {
    /* One statement does the insert-or-increment and reads the result back,
     * so there is no read-modify-write race to think about. */
    if (!wk_exec(WK_S("INSERT INTO counter VALUES (1, 1) "
                      "ON CONFLICT(id) DO UPDATE SET n = n + 1 RETURNING n"),
                 0, 0, &r, &e)) {
      wk_respond_text(resp, 500, e.message);
      return;
    }
    answer_count(resp, wk_first_integer(&r, 0), 1);
  } else if (is_head || wk_eq(req->method, WK_S("GET"))) {
    if (!wk_exec(WK_S("SELECT n FROM counter WHERE id = 1"), 0, 0, &r, &e)) {
      wk_respond_text(resp, 500, e.message);
      return;
    }
    answer_count(resp, wk_first_integer(&r, 0), !is_head);
  } else {
    wk_respond_not_allowed(resp, WK_S("GET, HEAD, POST"));
  }
}
