/*
 * wasmkeep.h: a hand-written Component Model binding for the WasmKeep `actor`
 * world (wit/wasmkeep.wit, package wasmkeep:actor@0.1.0), for freestanding C
 * compiled with clang --target=wasm32 and no libc.
 *
 * There is no wit-bindgen here: the canonical ABI is done by hand. The trick
 * that keeps it short is that, on wasm32, the C layout of the structs below is
 * byte for byte the canonical ABI memory layout of the matching WIT types:
 *
 *   - string and list<T> are (ptr: i32, len: i32): size 8, align 4. `len` is
 *     in bytes for strings (we use UTF-8) and in elements for lists.
 *   - a record lays its fields out in order, each aligned to its own
 *     alignment, and is aligned to its largest field. So is a C struct.
 *   - a variant/option/result is a discriminant (u8 while there are <= 256
 *     cases) followed by the payload aligned to the largest case alignment.
 *     A C struct { uint8_t tag; union { ... } } does exactly that.
 *
 * The static asserts in wasmkeep.c pin every size and offset so a mistake
 * here fails the build rather than corrupting memory at run time.
 *
 * Memory: everything the host hands us (request strings, SQL results) and
 * everything we build for an answer lives in a bump heap that is reset after
 * each export call (in the cabi_post_* functions the host calls once it has
 * read our results, or at the end of exports without results). An actor
 * therefore needs no free(): allocate freely during one event.
 */
#ifndef WASMKEEP_H
#define WASMKEEP_H

#include <stddef.h>
#include <stdint.h>

/* ---- basic shapes ------------------------------------------------------ */

/* `string`: UTF-8 bytes, not NUL-terminated. */
typedef struct { const char *ptr; size_t len; } wk_str;
/* `list<u8>` */
typedef struct { const uint8_t *ptr; size_t len; } wk_bytes;
/* `tuple<string, string>`: a tuple is a record with fields 0 and 1. */
typedef struct { wk_str name; wk_str value; } wk_header;
/* `headers` = `list<tuple<string, string>>` */
typedef struct { wk_header *ptr; size_t len; } wk_headers;

/* record http-request: 5 x (ptr,len) = 40 bytes, align 4. */
typedef struct {
  wk_str method;
  wk_str path;
  wk_str query;
  wk_headers headers;
  wk_bytes body;
} wk_request;

/* record http-response: u16 at 0, then (ptr,len) pairs at 4 and 12: the
 * 2 bytes of padding after `status` are the same in C and in the ABI. */
typedef struct {
  uint16_t status;
  wk_headers headers;
  wk_bytes body;
} wk_response;

/* record actor-id */
typedef struct { wk_str tenant; wk_str class_; wk_str name; } wk_actor_id;

/* variant ws-message { text(string), binary(list<u8>) }:
 * tag u8 at 0, payload (align 4) at 4, size 12. */
enum { WK_WS_TEXT = 0, WK_WS_BINARY = 1 };
typedef struct {
  uint8_t tag;
  union { wk_str text; wk_bytes binary; } val;
} wk_ws_message;

/* ---- storage ----------------------------------------------------------- */

/* variant value { null, integer(s64), real(f64), text(string), blob(list<u8>) }
 * The largest case alignment is 8 (s64/f64), so the payload sits at offset 8
 * and the whole value is 16 bytes, align 8. (Flattened it would be
 * [i32 tag, i64, i32] because joining i64/f64/i32 gives i64; we only ever
 * pass values in memory, inside list<value>, so that does not show up here.) */
enum { WK_NULL = 0, WK_INTEGER = 1, WK_REAL = 2, WK_TEXT = 3, WK_BLOB = 4 };
typedef struct {
  uint8_t tag;
  union { int64_t integer; double real; wk_str text; wk_bytes blob; } val;
} wk_value;

typedef struct { wk_str *ptr; size_t len; } wk_strs;     /* list<string> */
typedef struct { wk_value *ptr; size_t len; } wk_row;    /* list<value> */
typedef struct { wk_row *ptr; size_t len; } wk_rows;     /* list<list<value>> */

/* record exec-result: columns@0, rows@8, changes(u64)@16, rowid(s64)@24;
 * size 32, align 8. */
typedef struct {
  wk_strs columns;
  wk_rows rows;
  uint64_t changes;
  int64_t last_insert_rowid;
} wk_exec_result;

/* record sql-error: size 16, align 4. */
typedef struct { wk_str code; wk_str message; } wk_sql_error;

/* Runs one statement. Returns 1 on success (fills *res if non-NULL), 0 on
 * error (fills *err if non-NULL). Results live in the per-event heap. */
int wk_exec(wk_str sql, const wk_value *params, size_t nparams,
            wk_exec_result *res, wk_sql_error *err);
/* Same, through exec-durable. */
int wk_exec_durable(wk_str sql, const wk_value *params, size_t nparams,
                    wk_exec_result *res, wk_sql_error *err);
int wk_in_transaction(void);
int wk_delete_self(wk_sql_error *err);

/* ---- actors, alarms, websockets, config, log ----------------------------- */

wk_actor_id wk_self(void);
/* Returns 1 and fills *resp on ok, 0 and fills *err on err. */
int wk_call(wk_str class_, wk_str name, const wk_request *req,
            wk_response *resp, wk_str *err);

int wk_alarm_set(uint64_t at_ms, wk_str *err);
int wk_alarm_get(uint64_t *at_ms); /* 1 when set */
int wk_alarm_delete(wk_str *err);

int wk_ws_send(uint64_t conn, const wk_ws_message *msg, wk_str *err);
int wk_ws_close(uint64_t conn, uint16_t code, wk_str reason, wk_str *err);
typedef struct { uint64_t *ptr; size_t len; } wk_conns; /* list<u64> */
wk_conns wk_ws_connections(void);

int wk_config_get(wk_str name, wk_str *value); /* 1 when set */

enum { WK_DEBUG = 0, WK_INFO = 1, WK_WARN = 2, WK_ERROR = 3 };
void wk_log(int level, wk_str message);

/* ---- what an actor implements -------------------------------------------
 * wk_on_request is required. The others have weak no-op defaults in
 * wasmkeep.c (on-init and on-alarm answer ok). Return 0 for ok, or set
 * *err and return nonzero for err(string). */
int wk_on_init(wk_str *err);
void wk_on_request(const wk_request *req, wk_response *resp);
int wk_on_alarm(wk_str *err);
void wk_on_websocket_open(uint64_t conn, const wk_request *req);
void wk_on_websocket_message(uint64_t conn, const wk_ws_message *msg);
void wk_on_websocket_close(uint64_t conn, uint16_t code, wk_str reason);

/* ---- small helpers (no libc) -------------------------------------------- */

/* A string literal as wk_str, without strlen at run time. */
#define WK_S(lit) ((wk_str){ (lit), sizeof(lit) - 1 })
#define WK_VALUE_NULL() ((wk_value){ .tag = WK_NULL })
#define WK_VALUE_INT(i) ((wk_value){ .tag = WK_INTEGER, .val.integer = (i) })
#define WK_VALUE_TEXT(s) ((wk_value){ .tag = WK_TEXT, .val.text = (s) })
#define WK_VALUE_BLOB(b) ((wk_value){ .tag = WK_BLOB, .val.blob = (b) })

void *wk_alloc(size_t size, size_t align); /* per-event heap; traps when full */
/* Introspection, for tests: linear memory size in 64 KiB pages, where the
 * heap starts, and how many heap bytes this event has used so far. */
size_t wk_memory_pages(void);
size_t wk_heap_base(void);
size_t wk_heap_used(void);
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);

size_t wk_strlen(const char *s);
wk_str wk_cstr(const char *s);
int wk_eq(wk_str a, wk_str b);
int wk_starts_with(wk_str s, wk_str prefix);
wk_str wk_slice(wk_str s, size_t from, size_t to);
/* Index of the first `c` in s, or s.len. */
size_t wk_find(wk_str s, char c);
wk_bytes wk_str_bytes(wk_str s);
wk_str wk_bytes_str(wk_bytes b);

/* Percent-decodes %XX escapes (into the heap); '+' stays '+'. For paths and
 * raw query strings. */
wk_str wk_percent_decode(wk_str s);
/* The same, also turning '+' into ' ', as in form-encoded `a=b&c=d` queries. */
wk_str wk_form_decode(wk_str s);
/* Looks up `name` in an `a=b&c=d` query; returns 1 and the form-decoded
 * value when present (a bare `name` gives an empty value). */
int wk_query_param(wk_str query, wk_str name, wk_str *value);
/* Parses a non-negative decimal; returns 1 when all of s is digits. */
int wk_parse_u64(wk_str s, uint64_t *out);

/* A growable byte buffer in the per-event heap. */
typedef struct { char *ptr; size_t len; size_t cap; } wk_buf;
void wk_buf_bytes(wk_buf *b, const void *p, size_t n);
void wk_buf_str(wk_buf *b, wk_str s);
void wk_buf_cstr(wk_buf *b, const char *s);
void wk_buf_char(wk_buf *b, char c);
void wk_buf_i64(wk_buf *b, int64_t v);
void wk_buf_u64(wk_buf *b, uint64_t v);
void wk_buf_f64(wk_buf *b, double v); /* simple %g-ish rendering */
/* Renders a SQL value as text (NULL as empty, blob as raw bytes). */
void wk_buf_value(wk_buf *b, const wk_value *v);
wk_str wk_buf_as_str(const wk_buf *b);

/* Fills *resp: status, one content-type header (omitted when type.len == 0)
 * and the body. */
void wk_respond(wk_response *resp, uint16_t status, wk_str content_type,
                wk_bytes body);
void wk_respond_text(wk_response *resp, uint16_t status, wk_str text);
/* 405 "method not allowed\n" (text/plain) with `allow: <allow>`, e.g.
 * WK_S("GET, HEAD"). */
void wk_respond_not_allowed(wk_response *resp, wk_str allow);

/* The first column of the first row of a result when it is an integer;
 * `otherwise` when there is no row or column, or the value is not one. */
int64_t wk_first_integer(const wk_exec_result *r, int64_t otherwise);

#endif
