/*
 * greeter: an actor configured by its class. Each actor name under
 * /actor/greeter/<name> greets with the class's GREETING (from
 * `--config greeter=FILE`) and its own name.
 *
 *   GET, HEAD  -> "<GREETING>, <name>", e.g. "hello, ann"; 500 when
 *                 GREETING is not set
 *   otherwise  -> 405
 *
 * No state: on-init is the SDK's default (ok), and the actor's database
 * stays empty.
 */
#include "../sdk/wasmkeep.h"

void wk_on_request(const wk_request *req, wk_response *resp) {
  int is_head = wk_eq(req->method, WK_S("HEAD"));
  if (!is_head && !wk_eq(req->method, WK_S("GET"))) {
    wk_respond_not_allowed(resp, WK_S("GET, HEAD"));
    return;
  }
  wk_str greeting;
  if (!wk_config_get(WK_S("GREETING"), &greeting)) {
    wk_respond_text(resp, 500, is_head ? WK_S("") : WK_S("GREETING is not set"));
    return;
  }
  wk_buf b = {0};
  wk_buf_str(&b, greeting);
  wk_buf_cstr(&b, ", ");
  wk_buf_str(&b, wk_self().name);
  wk_respond_text(resp, 200, is_head ? WK_S("") : wk_buf_as_str(&b));
}
