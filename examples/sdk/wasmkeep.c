/*
 * wasmkeep.c: the canonical ABI glue for the WasmKeep `actor` world, by hand.
 * See wasmkeep.h for the layout rules this relies on.
 *
 * Core signatures (what `canon lift` / `canon lower` expect):
 *   - Parameters are flattened; up to 16 flat values are passed as core
 *     params (every function here stays below that limit).
 *   - A result that flattens to more than one core value comes back through
 *     memory. For an import, the caller (us) passes a pointer to a return area
 *     as the last parameter and the host writes the result there. For an
 *     export, we return an i32 pointer to a result area that we own, and the
 *     host calls `cabi_post_<name>` once it has read it.
 *   - Strings and lists the host gives us (export arguments, import results)
 *     are allocated by the host through our exported `cabi_realloc`.
 */
#include "wasmkeep.h"

#define WK_IMPORT(module, name) \
  __attribute__((import_module(module), import_name(name)))
#define WK_EXPORT(name) __attribute__((export_name(name)))

/* ---- layout checks: C layout == canonical ABI layout ------------------- */

#define WK_CHECK(cond) _Static_assert(cond, #cond)
WK_CHECK(sizeof(void *) == 4);
WK_CHECK(sizeof(wk_str) == 8 && _Alignof(wk_str) == 4);
WK_CHECK(sizeof(wk_header) == 16);
WK_CHECK(sizeof(wk_request) == 40);
WK_CHECK(sizeof(wk_response) == 20 && offsetof(wk_response, headers) == 4 &&
         offsetof(wk_response, body) == 12);
WK_CHECK(sizeof(wk_actor_id) == 24);
WK_CHECK(sizeof(wk_ws_message) == 12 && offsetof(wk_ws_message, val) == 4);
WK_CHECK(sizeof(wk_value) == 16 && _Alignof(wk_value) == 8 &&
         offsetof(wk_value, val) == 8);
WK_CHECK(sizeof(wk_exec_result) == 32 && _Alignof(wk_exec_result) == 8 &&
         offsetof(wk_exec_result, changes) == 16 &&
         offsetof(wk_exec_result, last_insert_rowid) == 24);
WK_CHECK(sizeof(wk_sql_error) == 16);

/* result<exec-result, sql-error>: tag u8, payload aligned to 8 (exec-result
 * holds u64/s64) at offset 8; 40 bytes. */
typedef struct {
  uint8_t is_err;
  union { wk_exec_result ok; wk_sql_error err; } val;
} wk_exec_ret;
WK_CHECK(sizeof(wk_exec_ret) == 40 && offsetof(wk_exec_ret, val) == 8);

/* result<_, sql-error>: no ok payload; error payload (align 4) at 4. */
typedef struct { uint8_t is_err; wk_sql_error err; } wk_unit_sql_ret;
WK_CHECK(sizeof(wk_unit_sql_ret) == 20 && offsetof(wk_unit_sql_ret, err) == 4);

/* result<_, string> and option<string>: tag, string at 4; 12 bytes. */
typedef struct { uint8_t tag; wk_str s; } wk_tag_str;
WK_CHECK(sizeof(wk_tag_str) == 12 && offsetof(wk_tag_str, s) == 4);

/* result<http-response, string>: payload align 4 at 4; 24 bytes. */
typedef struct {
  uint8_t is_err;
  union { wk_response ok; wk_str err; } val;
} wk_call_ret;
WK_CHECK(sizeof(wk_call_ret) == 24 && offsetof(wk_call_ret, val) == 4);

/* option<u64>: payload aligned to 8 at 8; 16 bytes. */
typedef struct { uint8_t is_some; uint64_t v; } wk_opt_u64;
WK_CHECK(sizeof(wk_opt_u64) == 16 && offsetof(wk_opt_u64, v) == 8);

/* ---- the per-event heap ------------------------------------------------- */

/* wasm-ld puts data, then the stack (or the other way round), and marks the
 * first free byte with __heap_base. Everything from there to the end of
 * linear memory is our heap. We start with whatever is left of the initial
 * memory (a single 64 KiB page when built as examples/build.ts does) and grow
 * memory only when an event needs more, e.g. for a large request body. */
extern char __heap_base;
static uintptr_t heap_top;     /* next free byte; 0 = not yet initialised */
static uintptr_t last_alloc;   /* start of the most recent allocation */

static uintptr_t heap_start(void) { return (uintptr_t)&__heap_base; }

static void heap_reset(void) {
  heap_top = heap_start();
  last_alloc = 0;
}

void *wk_alloc(size_t size, size_t align) {
  if (heap_top == 0) heap_reset();
  if (align == 0) align = 1;
  uintptr_t p = (heap_top + align - 1) & ~(uintptr_t)(align - 1);
  uintptr_t end = p + size;
  if (end < p) __builtin_trap();
  uintptr_t limit = __builtin_wasm_memory_size(0) * 65536u;
  if (end > limit) {
    size_t pages = (end - limit + 65535u) / 65536u;
    if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1) __builtin_trap();
  }
  heap_top = end;
  last_alloc = p;
  return (void *)p;
}

size_t wk_memory_pages(void) { return __builtin_wasm_memory_size(0); }
size_t wk_heap_base(void) { return heap_start(); }
size_t wk_heap_used(void) { return heap_top ? heap_top - heap_start() : 0; }

/* The canonical ABI's allocator: realloc(old, old_size, align, new_size).
 * The host only ever asks for fresh blocks (old == 0) when lowering strings
 * and lists, but we support growth too: in place when the block is the last
 * one handed out, by copying otherwise. */
WK_EXPORT("cabi_realloc")
void *cabi_realloc(void *old, size_t old_size, size_t align, size_t new_size) {
  if (old && (uintptr_t)old == last_alloc) {
    uintptr_t end = (uintptr_t)old + new_size;
    uintptr_t limit = __builtin_wasm_memory_size(0) * 65536u;
    if (end <= limit) {
      heap_top = end;
      return old;
    }
  }
  if (new_size == 0) return (void *)align; /* any aligned non-null pointer */
  void *p = wk_alloc(new_size, align);
  if (old) memcpy(p, old, old_size < new_size ? old_size : new_size);
  return p;
}

/* ---- imports ------------------------------------------------------------ */

#define STORAGE "wasmkeep:actor/storage@0.1.0"
#define ACTORS "wasmkeep:actor/actors@0.1.0"
#define ALARMS "wasmkeep:actor/alarms@0.1.0"
#define WEBSOCKETS "wasmkeep:actor/websockets@0.1.0"
#define CONFIG "wasmkeep:actor/config@0.1.0"
#define LOG "wasmkeep:actor/log@0.1.0"

/* exec(sql: string, params: list<value>) -> result<...>: flat params are
 * (sql ptr, sql len, params ptr, params len); the result needs memory, so a
 * return-area pointer comes last. */
WK_IMPORT(STORAGE, "exec")
void wk_import_exec(const char *, size_t, const wk_value *, size_t, wk_exec_ret *);
WK_IMPORT(STORAGE, "exec-durable")
void wk_import_exec_durable(const char *, size_t, const wk_value *, size_t, wk_exec_ret *);
WK_IMPORT(STORAGE, "in-transaction") int wk_import_in_transaction(void);
WK_IMPORT(STORAGE, "delete-self") void wk_import_delete_self(wk_unit_sql_ret *);

WK_IMPORT(ACTORS, "self") void wk_import_self(wk_actor_id *);
/* call(class, name, request): 2 + 2 + 10 = 14 flat params (<= 16, so no
 * spilling to memory), then the return area. */
WK_IMPORT(ACTORS, "call")
void wk_import_call(const char *, size_t, const char *, size_t,
                    const char *, size_t, const char *, size_t, const char *, size_t,
                    const wk_header *, size_t, const uint8_t *, size_t, wk_call_ret *);

WK_IMPORT(ALARMS, "set") void wk_import_alarm_set(uint64_t, wk_tag_str *);
WK_IMPORT(ALARMS, "get") void wk_import_alarm_get(wk_opt_u64 *);
WK_IMPORT(ALARMS, "delete") void wk_import_alarm_delete(wk_tag_str *);

/* send(connection: u64, message: ws-message): the variant flattens to
 * (tag, ptr, len) because text and binary both flatten to (i32, i32). */
WK_IMPORT(WEBSOCKETS, "send")
void wk_import_ws_send(uint64_t, int32_t, const void *, size_t, wk_tag_str *);
WK_IMPORT(WEBSOCKETS, "close")
void wk_import_ws_close(uint64_t, int32_t, const char *, size_t, wk_tag_str *);
WK_IMPORT(WEBSOCKETS, "connections") void wk_import_ws_connections(wk_conns *);

WK_IMPORT(CONFIG, "get") void wk_import_config_get(const char *, size_t, wk_tag_str *);
/* An enum flattens to its index as an i32. */
WK_IMPORT(LOG, "log") void wk_import_log(int32_t, const char *, size_t);

/* Return areas are taken from the heap (8-aligned, the largest alignment of
 * any result here) rather than the stack, to keep the stack small. The two
 * exec wrappers stay separate so an actor that never calls exec-durable does
 * not import it. */
static int exec_result(const wk_exec_ret *ret, wk_exec_result *res, wk_sql_error *err) {
  if (ret->is_err) {
    if (err) *err = ret->val.err;
    return 0;
  }
  if (res) *res = ret->val.ok;
  return 1;
}

int wk_exec(wk_str sql, const wk_value *params, size_t n, wk_exec_result *res,
            wk_sql_error *err) {
  wk_exec_ret *ret = wk_alloc(sizeof *ret, 8);
  wk_import_exec(sql.ptr, sql.len, params, n, ret);
  return exec_result(ret, res, err);
}

int wk_exec_durable(wk_str sql, const wk_value *params, size_t n,
                    wk_exec_result *res, wk_sql_error *err) {
  wk_exec_ret *ret = wk_alloc(sizeof *ret, 8);
  wk_import_exec_durable(sql.ptr, sql.len, params, n, ret);
  return exec_result(ret, res, err);
}

int wk_in_transaction(void) { return wk_import_in_transaction() != 0; }

int wk_delete_self(wk_sql_error *err) {
  wk_unit_sql_ret *ret = wk_alloc(sizeof *ret, 4);
  wk_import_delete_self(ret);
  if (ret->is_err && err) *err = ret->err;
  return !ret->is_err;
}

wk_actor_id wk_self(void) {
  wk_actor_id *ret = wk_alloc(sizeof *ret, 4);
  wk_import_self(ret);
  return *ret;
}

int wk_call(wk_str class_, wk_str name, const wk_request *r, wk_response *resp,
            wk_str *err) {
  wk_call_ret *ret = wk_alloc(sizeof *ret, 4);
  wk_import_call(class_.ptr, class_.len, name.ptr, name.len, r->method.ptr,
                 r->method.len, r->path.ptr, r->path.len, r->query.ptr,
                 r->query.len, r->headers.ptr, r->headers.len, r->body.ptr,
                 r->body.len, ret);
  if (ret->is_err) {
    if (err) *err = ret->val.err;
    return 0;
  }
  if (resp) *resp = ret->val.ok;
  return 1;
}

static int tag_str_result(wk_tag_str *ret, wk_str *err) {
  if (ret->tag && err) *err = ret->s;
  return !ret->tag;
}

int wk_alarm_set(uint64_t at_ms, wk_str *err) {
  wk_tag_str *ret = wk_alloc(sizeof *ret, 4);
  wk_import_alarm_set(at_ms, ret);
  return tag_str_result(ret, err);
}

int wk_alarm_get(uint64_t *at_ms) {
  wk_opt_u64 *ret = wk_alloc(sizeof *ret, 8);
  wk_import_alarm_get(ret);
  if (ret->is_some && at_ms) *at_ms = ret->v;
  return ret->is_some;
}

int wk_alarm_delete(wk_str *err) {
  wk_tag_str *ret = wk_alloc(sizeof *ret, 4);
  wk_import_alarm_delete(ret);
  return tag_str_result(ret, err);
}

int wk_ws_send(uint64_t conn, const wk_ws_message *msg, wk_str *err) {
  wk_tag_str *ret = wk_alloc(sizeof *ret, 4);
  /* Both cases are (ptr, len), so the text view covers either. */
  wk_import_ws_send(conn, msg->tag, msg->val.text.ptr, msg->val.text.len, ret);
  return tag_str_result(ret, err);
}

int wk_ws_close(uint64_t conn, uint16_t code, wk_str reason, wk_str *err) {
  wk_tag_str *ret = wk_alloc(sizeof *ret, 4);
  wk_import_ws_close(conn, code, reason.ptr, reason.len, ret);
  return tag_str_result(ret, err);
}

wk_conns wk_ws_connections(void) {
  wk_conns *ret = wk_alloc(sizeof *ret, 4);
  wk_import_ws_connections(ret);
  return *ret;
}

int wk_config_get(wk_str name, wk_str *value) {
  wk_tag_str *ret = wk_alloc(sizeof *ret, 4);
  wk_import_config_get(name.ptr, name.len, ret);
  if (ret->tag && value) *value = ret->s;
  return ret->tag;
}

void wk_log(int level, wk_str message) {
  wk_import_log(level, message.ptr, message.len);
}

/* ---- exports ------------------------------------------------------------ */

/* Result areas for exports live in static memory: they must outlive the
 * export's return (the host reads them afterwards), and the host calls
 * cabi_post_<name> when it is done, where we reset the heap. */
static wk_tag_str init_ret, alarm_ret;
static wk_response request_ret;

/* result<_, string> flattens to (i32 tag, i32 ptr, i32 len): three values, so
 * the export returns a pointer to it. */
WK_EXPORT("on-init") wk_tag_str *wk_export_on_init(void) {
  wk_str err = WK_S("");
  init_ret.tag = wk_on_init(&err) != 0;
  init_ret.s = init_ret.tag ? err : WK_S("");
  return &init_ret;
}
WK_EXPORT("cabi_post_on-init") void wk_post_on_init(wk_tag_str *p) {
  (void)p;
  heap_reset();
}

/* on-request(request: http-request) -> http-response: the record flattens to
 * 10 i32s (five (ptr, len) pairs); the response (5 flat values) is returned
 * through a pointer. */
WK_EXPORT("on-request")
wk_response *wk_export_on_request(const char *m, size_t ml, const char *p, size_t pl,
                                  const char *q, size_t ql, wk_header *h, size_t hl,
                                  const uint8_t *b, size_t bl) {
  wk_request req = {{m, ml}, {p, pl}, {q, ql}, {h, hl}, {b, bl}};
  request_ret = (wk_response){500, {0, 0}, {0, 0}};
  wk_on_request(&req, &request_ret);
  return &request_ret;
}
WK_EXPORT("cabi_post_on-request") void wk_post_on_request(wk_response *p) {
  (void)p;
  heap_reset();
}

WK_EXPORT("on-alarm") wk_tag_str *wk_export_on_alarm(void) {
  wk_str err = WK_S("");
  alarm_ret.tag = wk_on_alarm(&err) != 0;
  alarm_ret.s = alarm_ret.tag ? err : WK_S("");
  return &alarm_ret;
}
WK_EXPORT("cabi_post_on-alarm") void wk_post_on_alarm(wk_tag_str *p) {
  (void)p;
  heap_reset();
}

/* The WebSocket exports return nothing, so there is no post-return: the heap
 * is reset as they return (their arguments are not needed any more). */
WK_EXPORT("on-websocket-open")
void wk_export_on_websocket_open(uint64_t conn, const char *m, size_t ml,
                                 const char *p, size_t pl, const char *q, size_t ql,
                                 wk_header *h, size_t hl, const uint8_t *b, size_t bl) {
  wk_request req = {{m, ml}, {p, pl}, {q, ql}, {h, hl}, {b, bl}};
  wk_on_websocket_open(conn, &req);
  heap_reset();
}

WK_EXPORT("on-websocket-message")
void wk_export_on_websocket_message(uint64_t conn, int32_t tag, const char *ptr,
                                    size_t len) {
  wk_ws_message msg;
  msg.tag = (uint8_t)tag;
  msg.val.text = (wk_str){ptr, len};
  wk_on_websocket_message(conn, &msg);
  heap_reset();
}

/* u16 flattens to an i32. */
WK_EXPORT("on-websocket-close")
void wk_export_on_websocket_close(uint64_t conn, int32_t code, const char *ptr,
                                  size_t len) {
  wk_on_websocket_close(conn, (uint16_t)code, (wk_str){ptr, len});
  heap_reset();
}

/* Weak defaults for the hooks an actor may leave out. */
__attribute__((weak)) int wk_on_init(wk_str *err) { (void)err; return 0; }
__attribute__((weak)) int wk_on_alarm(wk_str *err) { (void)err; return 0; }
__attribute__((weak)) void wk_on_websocket_open(uint64_t c, const wk_request *r) {
  (void)c; (void)r;
}
__attribute__((weak)) void wk_on_websocket_message(uint64_t c, const wk_ws_message *m) {
  (void)c; (void)m;
}
__attribute__((weak)) void wk_on_websocket_close(uint64_t c, uint16_t code, wk_str r) {
  (void)c; (void)code; (void)r;
}

/* ---- libc bits the compiler may call ------------------------------------ */

void *memcpy(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  while (n--) *d++ = *s++;
  return dst;
}

void *memmove(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  if (d < s) {
    while (n--) *d++ = *s++;
  } else {
    while (n--) d[n] = s[n];
  }
  return dst;
}

void *memset(void *dst, int c, size_t n) {
  unsigned char *d = dst;
  while (n--) *d++ = (unsigned char)c;
  return dst;
}

int memcmp(const void *a, const void *b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (; n; n--, x++, y++)
    if (*x != *y) return *x - *y;
  return 0;
}

/* ---- string helpers ----------------------------------------------------- */

size_t wk_strlen(const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  return n;
}

wk_str wk_cstr(const char *s) { return (wk_str){s, wk_strlen(s)}; }

int wk_eq(wk_str a, wk_str b) {
  return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

int wk_starts_with(wk_str s, wk_str prefix) {
  return s.len >= prefix.len && memcmp(s.ptr, prefix.ptr, prefix.len) == 0;
}

wk_str wk_slice(wk_str s, size_t from, size_t to) {
  if (to > s.len) to = s.len;
  if (from > to) from = to;
  return (wk_str){s.ptr + from, to - from};
}

size_t wk_find(wk_str s, char c) {
  for (size_t i = 0; i < s.len; i++)
    if (s.ptr[i] == c) return i;
  return s.len;
}

wk_bytes wk_str_bytes(wk_str s) { return (wk_bytes){(const uint8_t *)s.ptr, s.len}; }
wk_str wk_bytes_str(wk_bytes b) { return (wk_str){(const char *)b.ptr, b.len}; }

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static wk_str decode(wk_str s, int plus_is_space) {
  char *out = wk_alloc(s.len ? s.len : 1, 1);
  size_t n = 0;
  for (size_t i = 0; i < s.len; i++) {
    char c = s.ptr[i];
    if (c == '+' && plus_is_space) {
      c = ' ';
    } else if (c == '%' && i + 2 < s.len && hex_digit(s.ptr[i + 1]) >= 0 &&
               hex_digit(s.ptr[i + 2]) >= 0) {
      c = (char)(hex_digit(s.ptr[i + 1]) * 16 + hex_digit(s.ptr[i + 2]));
      i += 2;
    }
    out[n++] = c;
  }
  return (wk_str){out, n};
}

wk_str wk_percent_decode(wk_str s) { return decode(s, 0); }
wk_str wk_form_decode(wk_str s) { return decode(s, 1); }

int wk_query_param(wk_str query, wk_str name, wk_str *value) {
  size_t i = 0;
  while (i <= query.len) {
    wk_str rest = wk_slice(query, i, query.len);
    size_t amp = wk_find(rest, '&');
    wk_str pair = wk_slice(rest, 0, amp);
    size_t eq = wk_find(pair, '=');
    if (wk_eq(wk_form_decode(wk_slice(pair, 0, eq)), name)) {
      if (value) *value = wk_form_decode(wk_slice(pair, eq + 1, pair.len));
      return 1;
    }
    i += amp + 1;
  }
  return 0;
}

int wk_parse_u64(wk_str s, uint64_t *out) {
  uint64_t v = 0;
  if (s.len == 0 || s.len > 19) return 0;
  for (size_t i = 0; i < s.len; i++) {
    if (s.ptr[i] < '0' || s.ptr[i] > '9') return 0;
    v = v * 10 + (uint64_t)(s.ptr[i] - '0');
  }
  *out = v;
  return 1;
}

/* ---- buffers ------------------------------------------------------------ */

void wk_buf_bytes(wk_buf *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->len + n) cap *= 2;
    /* cabi_realloc grows in place when the buffer is the latest allocation. */
    b->ptr = cabi_realloc(b->ptr, b->cap, 1, cap);
    b->cap = cap;
  }
  memcpy(b->ptr + b->len, p, n);
  b->len += n;
}

void wk_buf_str(wk_buf *b, wk_str s) { wk_buf_bytes(b, s.ptr, s.len); }
void wk_buf_cstr(wk_buf *b, const char *s) { wk_buf_bytes(b, s, wk_strlen(s)); }
void wk_buf_char(wk_buf *b, char c) { wk_buf_bytes(b, &c, 1); }

void wk_buf_u64(wk_buf *b, uint64_t v) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  wk_buf_bytes(b, tmp + sizeof tmp - n, n);
}

void wk_buf_i64(wk_buf *b, int64_t v) {
  if (v < 0) {
    wk_buf_char(b, '-');
    wk_buf_u64(b, (uint64_t)0 - (uint64_t)v);
  } else {
    wk_buf_u64(b, (uint64_t)v);
  }
}

/* Fixed notation with up to 15 significant digits, at least one fraction
 * digit (like SQLite's "3.0"); v must be in [0, 1e15). */
static void buf_f64_fixed(wk_buf *b, double v) {
  uint64_t ip = (uint64_t)v;
  int int_digits = 1;
  for (uint64_t t = ip; t >= 10; t /= 10) int_digits++;
  int k = 15 - int_digits;
  if (k < 1) k = 1;
  uint64_t scale = 1;
  for (int i = 0; i < k; i++) scale *= 10;
  uint64_t frac = (uint64_t)((v - (double)ip) * (double)scale + 0.5);
  if (frac >= scale) { ip++; frac -= scale; }
  wk_buf_u64(b, ip);
  wk_buf_char(b, '.');
  char digits[15];
  for (int i = k - 1; i >= 0; i--) { digits[i] = (char)('0' + frac % 10); frac /= 10; }
  int n = k;
  while (n > 1 && digits[n - 1] == '0') n--;
  wk_buf_bytes(b, digits, (size_t)n);
}

/* A readable rendering of a double: "2.5", "3.0", "1.0e+20", "1.5e-07".
 * Good for tests and logs; not a shortest-round-trip printer. */
void wk_buf_f64(wk_buf *b, double v) {
  if (v != v) { wk_buf_cstr(b, "NaN"); return; }
  if (v < 0) { wk_buf_char(b, '-'); v = -v; }
  if (v - v != 0) { wk_buf_cstr(b, "Inf"); return; }
  if (v == 0 || (v >= 1e-4 && v < 1e15)) { buf_f64_fixed(b, v); return; }
  int e = 0;
  while (v >= 10) { v /= 10; e++; }
  while (v < 1) { v *= 10; e--; }
  buf_f64_fixed(b, v);
  if (b->len >= 4 && b->ptr[b->len - 4] == '1' && b->ptr[b->len - 3] == '0' &&
      b->ptr[b->len - 2] == '.' && b->ptr[b->len - 1] == '0') {
    /* 9.99999... rounded up to "10.0": renormalise. */
    b->len -= 4;
    wk_buf_cstr(b, "1.0");
    e++;
  }
  wk_buf_cstr(b, e < 0 ? "e-" : "e+");
  wk_buf_u64(b, (uint64_t)(e < 0 ? -e : e));
}

void wk_buf_value(wk_buf *b, const wk_value *v) {
  switch (v->tag) {
    case WK_INTEGER: wk_buf_i64(b, v->val.integer); break;
    case WK_REAL: wk_buf_f64(b, v->val.real); break;
    case WK_TEXT: wk_buf_str(b, v->val.text); break;
    case WK_BLOB: wk_buf_bytes(b, v->val.blob.ptr, v->val.blob.len); break;
    default: break; /* NULL renders as nothing */
  }
}

wk_str wk_buf_as_str(const wk_buf *b) { return (wk_str){b->ptr, b->len}; }

/* ---- responses ---------------------------------------------------------- */

void wk_respond(wk_response *resp, uint16_t status, wk_str content_type,
                wk_bytes body) {
  resp->status = status;
  resp->headers = (wk_headers){0, 0};
  if (content_type.len) {
    wk_header *h = wk_alloc(sizeof *h, 4);
    h->name = WK_S("content-type");
    h->value = content_type;
    resp->headers = (wk_headers){h, 1};
  }
  resp->body = body;
}

void wk_respond_text(wk_response *resp, uint16_t status, wk_str text) {
  wk_respond(resp, status, WK_S("text/plain; charset=utf-8"), wk_str_bytes(text));
}

void wk_respond_not_allowed(wk_response *resp, wk_str allow) {
  wk_header *h = wk_alloc(2 * sizeof *h, 4);
  h[0] = (wk_header){WK_S("content-type"), WK_S("text/plain; charset=utf-8")};
  h[1] = (wk_header){WK_S("allow"), allow};
  resp->status = 405;
  resp->headers = (wk_headers){h, 2};
  resp->body = wk_str_bytes(WK_S("method not allowed\n"));
}

/* ---- results ------------------------------------------------------------ */

int64_t wk_first_integer(const wk_exec_result *r, int64_t otherwise) {
  if (r->rows.len == 0 || r->rows.ptr[0].len == 0) return otherwise;
  const wk_value *v = &r->rows.ptr[0].ptr[0];
  return v->tag == WK_INTEGER ? v->val.integer : otherwise;
}
