/* Optional compiled loops for the two hot paths of StateGlass (plain CPython C API).
 *
 *   read_records(buf, allow_deletes[, whole_values]) -> list[(key, value|None)] | None
 *   read_record_keys(buf, allow_deletes) -> (puts, removed) | None
 *   compile_plan(key_plan, value_plan) -> capsule
 *   render_lines(plan, pairs, partition_id[, skip]) -> (bytes, pending pair | None, rows)
 *   render_chain(plan, snapshot | None, deltas, partition_id) -> (parts, rows) | None
 *   binary_column(pairs, index[, strip_version]) -> (offsets, data) | None
 *   chain_columns(snapshot | None, deltas, keys, values[, value_sizes]) -> (rows, columns...) | None
 *   flat_struct(offsets, data, first, rows, sizes) -> [(values, validity, nulls, offsets)] | None
 *   gather_bytes(data, starts, sizes) -> (offsets, bytes) | None
 *   lz4_stream(data, budget) -> bytes | None
 *   sst_data_blocks(table, index_block, format_version, checksum_type, budget) -> (blocks, n) | None
 *   block_entries(block) -> [(key, value start, value end)] | None
 *   runs_columns(runs, keys, values, strip_version[, value_sizes]) -> (rows, columns...) | None
 *   keep_freed_memory() -> bool
 *
 * Every function refuses rather than guesses: on anything unusual (damaged stream, a row
 * that does not fit its schema, invalid UTF-8, a key that is not bytes) it hands control
 * back to the pure-Python code in parsers/hdfs_files.py and app/render/bytes_to_json.py, which raises
 * the precise error or renders the odd row. Python is the specification; this file only has
 * to agree with it where it answers at all (tests/parsers/test_speedups.py checks that).
 *
 * STATEGLASS_PURE=1 in the environment makes the import fail, so the fallback is used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

#define XXH_INLINE_ALL
#include "vendor/xxhash.h"
#include "vendor/lz4.h"
#if defined(__GLIBC__)
#include <malloc.h>
#endif

/* ------------------------------------------------------------------------------------------
 * Buffers handed to Python as they are
 * ------------------------------------------------------------------------------------------ */

/* Bytes a loop filled in its own memory, read through the buffer protocol (pyarrow's
 * py_buffer takes them without a copy) and freed with the last reference. A column of a
 * partition is megabytes: copying it into a bytes object costs a tenth of the merge. */
typedef struct {
    PyObject_HEAD
    void *data;
    Py_ssize_t len;
} OwnedBytes;

static int
owned_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    OwnedBytes *o = (OwnedBytes *)self;
    return PyBuffer_FillInfo(view, self, o->data, o->len, 1, flags);
}

static void
owned_dealloc(PyObject *self)
{
    PyMem_RawFree(((OwnedBytes *)self)->data);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs owned_as_buffer = {owned_getbuffer, NULL};

static PyTypeObject OwnedBytesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stateglass.parsers._speedups.OwnedBytes",
    .tp_basicsize = sizeof(OwnedBytes),
    .tp_dealloc = owned_dealloc,
    .tp_as_buffer = &owned_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Bytes a compiled loop made, read through the buffer protocol.",
};

/* `len` bytes at `data` (from PyMem_RawMalloc, not NULL), owned by the new object from
 * here on; NULL with a Python error, `data` then still the caller's. */
static PyObject *
owned_bytes(void *data, Py_ssize_t len)
{
    OwnedBytes *o = PyObject_New(OwnedBytes, &OwnedBytesType);
    if (o == NULL)
        return NULL;
    o->data = data;
    o->len = len;
    return (PyObject *)o;
}

/* ------------------------------------------------------------------------------------------
 * Record streams: keySize:int32BE key valueSize:int32BE value ... -1:int32BE
 * ------------------------------------------------------------------------------------------ */

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

/* One record: the key, and its value (an HDFS delta's cut to a multiple of 8, as Spark does:
 * pre-2.3 writers padded values; a RocksDB changelog's whole) or NULL with vlen -1 for a
 * removal. 0 = go on, -1 = Python error. */
typedef int (*RecordVisitor)(void *ctx, const unsigned char *key, int32_t klen,
                             const unsigned char *val, int32_t vlen);

/* Walk a stream, handing each record to `visit`. 1 = clean end, 0 = not clean (the caller
 * falls back to the careful parser), -1 = Python error. */
static inline int
walk_stream(const unsigned char *buf, Py_ssize_t size, int allow_deletes, int whole_values,
            RecordVisitor visit, void *ctx)
{
    const int32_t value_mask = whole_values ? ~0 : ~7;
    Py_ssize_t pos = 0;
    for (;;) {
        if (size - pos < 4)
            return 0;
        int32_t key_size = be32(buf + pos);
        if (key_size < 0)
            return key_size == -1 && pos + 4 == size;
        Py_ssize_t key_start = pos + 4;
        Py_ssize_t key_end = key_start + key_size;
        if (key_end + 4 > size)
            return 0;
        int32_t value_size = be32(buf + key_end);
        if (value_size < 0) {
            if (value_size != -1 || !allow_deletes)
                return 0;
            if (visit(ctx, buf + key_start, key_size, NULL, -1) < 0)
                return -1;
            pos = key_end + 4;
            continue;
        }
        Py_ssize_t value_start = key_end + 4;
        if (value_start + value_size > size)
            return 0;
        if (visit(ctx, buf + key_start, key_size, buf + value_start, value_size & value_mask) < 0)
            return -1;
        pos = value_start + value_size;
    }
}

/* Where walk_records puts records: keys (and values when `values`) into `puts`, removed keys
 * into `dels` (or as (key, None) into `puts` when dels is NULL). */
typedef struct {
    int values;
    PyObject *puts, *dels;
} ListSink;

static int
list_visit(void *ctx, const unsigned char *k, int32_t klen, const unsigned char *v,
           int32_t vlen)
{
    ListSink *sink = ctx;
    PyObject *key = PyBytes_FromStringAndSize((const char *)k, klen);
    if (key == NULL)
        return -1;
    PyObject *item = key, *target = sink->puts;
    if (v == NULL && sink->dels != NULL) {
        target = sink->dels;
    }
    else if (v == NULL || sink->values) {
        PyObject *value =
            v == NULL ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)v, vlen);
        item = value == NULL ? NULL : PyTuple_New(2);
        if (item == NULL) {
            Py_DECREF(key);
            Py_XDECREF(value);
            return -1;
        }
        PyTuple_SET_ITEM(item, 0, key);
        PyTuple_SET_ITEM(item, 1, value);
    }
    int rc = PyList_Append(target, item);
    Py_DECREF(item);
    return rc;
}

static int
walk_records(const unsigned char *buf, Py_ssize_t size, int allow_deletes, int whole_values,
             int values, PyObject *puts, PyObject *dels)
{
    ListSink sink = {values, puts, dels};
    return walk_stream(buf, size, allow_deletes, whole_values, list_visit, &sink);
}

static PyObject *
read_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    int allow_deletes, whole_values = 0;
    if (!PyArg_ParseTuple(args, "y*p|p:read_records", &view, &allow_deletes, &whole_values))
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    /* Hundreds of thousands of new tuples would trigger the cyclic GC over and over, and
     * each pass walks the growing list; none of them can be part of a cycle. */
    int gc_was_enabled = PyGC_Disable();
    int rc = walk_records(view.buf, view.len, allow_deletes, whole_values, 1, out, NULL);
    if (gc_was_enabled)
        PyGC_Enable();
    PyBuffer_Release(&view);
    if (rc == 1)
        return out;
    Py_DECREF(out);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
read_record_keys(PyObject *self, PyObject *args)
{
    Py_buffer view;
    int allow_deletes;
    if (!PyArg_ParseTuple(args, "y*p:read_record_keys", &view, &allow_deletes))
        return NULL;
    PyObject *puts = PyList_New(0);
    PyObject *dels = PyList_New(0);
    int rc = -1;
    if (puts != NULL && dels != NULL)
        rc = walk_records(view.buf, view.len, allow_deletes, 0, 0, puts, dels);
    PyBuffer_Release(&view);
    if (rc == 1) {
        PyObject *res = PyTuple_Pack(2, puts, dels);
        Py_DECREF(puts);
        Py_DECREF(dels);
        return res;
    }
    Py_XDECREF(puts);
    Py_XDECREF(dels);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------
 * UnsafeRow -> Spark's toJSON text, for structs of simple types
 * ------------------------------------------------------------------------------------------ */

/* Field type codes; app/render/bytes_to_json.py (_PLAN_CODES) must use the same numbers.
 *
 * T_DOUBLE, T_DATE, T_TS and T_NTZ render the common values here and hand the rest (Java's
 * odd double digits, years outside 1600-9999, the 1582 calendar gap) to the field's Python
 * function `fn`, which gets the slot's value. T_CALL4/T_CALL8 pass the 4- or 8-byte slot as
 * an int to `fn`, T_FLOAT the float32 as a float; T_CALLVAR calls fn(buf, offset, size, end)
 * for a variable-length value (arrays, maps, large decimals, intervals). Whatever `fn`
 * returns (a str) is the JSON text; if it raises, the row goes back to Python, which raises
 * the same error with its context. */
enum { T_VOID = 0, T_BOOL = 1, T_BYTE = 2, T_SHORT = 3, T_INT = 4, T_LONG = 5, T_STRING = 6,
       T_STRUCT = 7, T_DOUBLE = 8, T_FLOAT = 9, T_DATE = 10, T_TS = 11, T_NTZ = 12,
       T_DECIMAL = 13, T_BINARY = 14, T_CALL4 = 15, T_CALL8 = 16, T_CALLVAR = 17, T_LAST = 17 };

typedef struct Plan Plan;
typedef struct {
    char *name; /* the JSON-quoted field name followed by ':' */
    Py_ssize_t name_len;
    int code;
    Plan *sub;         /* T_STRUCT only */
    PyObject *fn;      /* the Python text of a value (see above), or NULL */
    long long param;   /* T_TS: the zone's fixed offset in seconds; T_DECIMAL: the scale */
    char *extra;       /* T_TS: the offset suffix and closing quote, e.g. Z" */
    Py_ssize_t extra_len;
} Field;

struct Plan {
    Py_ssize_t n;
    Py_ssize_t words; /* 8-byte words of the null bitset */
    Py_ssize_t fixed; /* bytes of the fixed region: bitset + one 8-byte slot per field */
    Field *fields;
};

static void
plan_free(Plan *p)
{
    if (p == NULL)
        return;
    for (Py_ssize_t i = 0; i < p->n; i++) {
        PyMem_Free(p->fields[i].name);
        PyMem_Free(p->fields[i].extra);
        Py_XDECREF(p->fields[i].fn);
        plan_free(p->fields[i].sub);
    }
    PyMem_Free(p->fields);
    PyMem_Free(p);
}

static char *
copy_bytes(PyObject *b, Py_ssize_t *len)
{
    *len = PyBytes_GET_SIZE(b);
    char *out = PyMem_Malloc(*len ? (size_t)*len : 1);
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(out, PyBytes_AS_STRING(b), (size_t)*len);
    return out;
}

/* A plan is a tuple of (name bytes, code, sub-plan or None, fn or None, param int, extra
 * bytes) per field. */
static Plan *
plan_build(PyObject *spec, int depth)
{
    if (depth > 64) {
        PyErr_SetString(PyExc_ValueError, "plan nested too deeply");
        return NULL;
    }
    if (!PyTuple_Check(spec)) {
        PyErr_SetString(PyExc_TypeError, "a plan is a tuple of (name, code, sub-plan)");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(spec);
    Plan *p = PyMem_Calloc(1, sizeof(Plan));
    if (p == NULL)
        return (Plan *)PyErr_NoMemory();
    p->fields = PyMem_Calloc(n ? n : 1, sizeof(Field));
    if (p->fields == NULL) {
        PyMem_Free(p);
        return (Plan *)PyErr_NoMemory();
    }
    p->n = n;
    p->words = (n + 63) >> 6;
    p->fixed = 8 * p->words + 8 * n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name, *sub, *fn, *extra;
        int code;
        long long param;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(spec, i), "SiOOLS:plan field", &name, &code,
                              &sub, &fn, &param, &extra))
            goto fail;
        Field *f = &p->fields[i];
        f->name = copy_bytes(name, &f->name_len);
        if (f->name == NULL)
            goto fail;
        f->extra = copy_bytes(extra, &f->extra_len);
        if (f->extra == NULL)
            goto fail;
        if (code < T_VOID || code > T_LAST) {
            PyErr_Format(PyExc_ValueError, "unknown plan type code %d", code);
            goto fail;
        }
        f->code = code;
        f->param = param;
        if (fn != Py_None) {
            Py_INCREF(fn);
            f->fn = fn;
        }
        else if (code >= T_DOUBLE && code != T_DECIMAL && code != T_BINARY) {
            PyErr_Format(PyExc_ValueError, "plan type code %d needs a function", code);
            goto fail;
        }
        if (code == T_STRUCT) {
            f->sub = plan_build(sub, depth + 1);
            if (f->sub == NULL)
                goto fail;
        }
    }
    return p;
fail:
    plan_free(p);
    return NULL;
}

#define PLAN_CAPSULE "stateglass._speedups.plan"

typedef struct {
    Plan *key;
    Plan *value;
} LinePlan;

static void
line_plan_destroy(PyObject *capsule)
{
    LinePlan *lp = PyCapsule_GetPointer(capsule, PLAN_CAPSULE);
    if (lp != NULL) {
        plan_free(lp->key);
        plan_free(lp->value);
        PyMem_Free(lp);
    }
}

static PyObject *
compile_plan(PyObject *self, PyObject *args)
{
    PyObject *key_spec, *value_spec;
    if (!PyArg_ParseTuple(args, "OO:compile_plan", &key_spec, &value_spec))
        return NULL;
    LinePlan *lp = PyMem_Calloc(1, sizeof(LinePlan));
    if (lp == NULL)
        return PyErr_NoMemory();
    lp->key = plan_build(key_spec, 0);
    if (lp->key != NULL)
        lp->value = plan_build(value_spec, 0);
    if (lp->value == NULL) {
        plan_free(lp->key);
        PyMem_Free(lp);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(lp, PLAN_CAPSULE, line_plan_destroy);
    if (capsule == NULL) {
        plan_free(lp->key);
        plan_free(lp->value);
        PyMem_Free(lp);
    }
    return capsule;
}

/* Growing output buffer. */
typedef struct {
    char *buf;
    size_t len, cap;
} Out;

static int
out_reserve(Out *o, size_t extra)
{
    if (o->len + extra <= o->cap)
        return 0;
    size_t cap = o->cap ? o->cap * 2 : 1 << 16;
    while (cap < o->len + extra)
        cap *= 2;
    char *buf = PyMem_Realloc(o->buf, cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = buf;
    o->cap = cap;
    return 0;
}

static inline void
put(Out *o, const char *s, size_t n)
{
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static inline uint64_t
le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if PY_BIG_ENDIAN
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint64_t
be64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if !PY_BIG_ENDIAN
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t
le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static void
put_int(Out *o, int64_t v)
{
    char tmp[24];
    char *end = tmp + sizeof(tmp), *w = end;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--w = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--w = '-';
    put(o, w, (size_t)(end - w));
}

static const char HEX[] = "0123456789ABCDEF";

/* A JSON string literal as Jackson writes it, from bytes that must be valid UTF-8 (what
 * Python's strict decoder accepts). Returns 1 when the bytes are not valid UTF-8: the
 * caller hands the row to Python, which decodes it as Java does. */
static int
put_string(Out *o, const unsigned char *s, Py_ssize_t n)
{
    if (out_reserve(o, (size_t)n * 6 + 2) < 0)
        return -1;
    char *w = o->buf + o->len;
    *w++ = '"';
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            if (c >= 0x20 && c != '"' && c != '\\') {
                *w++ = (char)c;
                i++;
                continue;
            }
            *w++ = '\\';
            switch (c) {
            case '"': *w++ = '"'; break;
            case '\\': *w++ = '\\'; break;
            case '\b': *w++ = 'b'; break;
            case '\f': *w++ = 'f'; break;
            case '\n': *w++ = 'n'; break;
            case '\r': *w++ = 'r'; break;
            case '\t': *w++ = 't'; break;
            default:
                *w++ = 'u';
                *w++ = '0';
                *w++ = '0';
                *w++ = HEX[c >> 4];
                *w++ = HEX[c & 15];
            }
            i++;
            continue;
        }
        Py_ssize_t len;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c < 0xC2)
            return 1; /* a continuation byte, or an overlong 2-byte form */
        else if (c < 0xE0)
            len = 2;
        else if (c < 0xF0) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0; /* overlong */
            else if (c == 0xED)
                hi = 0x9F; /* surrogates */
        }
        else if (c < 0xF5) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90; /* overlong */
            else if (c == 0xF4)
                hi = 0x8F; /* above U+10FFFF */
        }
        else
            return 1;
        if (i + len > n || s[i + 1] < lo || s[i + 1] > hi)
            return 1;
        for (Py_ssize_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return 1;
        memcpy(w, s + i, (size_t)len);
        w += len;
        i += len;
    }
    *w++ = '"';
    o->len = (size_t)(w - o->buf);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Dates, timestamps, doubles, decimals, binary; and values left to Python
 * ------------------------------------------------------------------------------------------ */

/* Days 1600-01-01 and 9999-12-31 since 1970-01-01: inside them the calendar is plain
 * proleptic Gregorian with 4-digit years; outside (the 1582 gap, signed or 5-digit years)
 * the field's Python function renders the value. */
#define DAY_MIN (-135140LL)
#define DAY_MAX 2932896LL
#define SEC_PER_DAY 86400LL
#define US_PER_SEC 1000000LL

static inline long long
floor_div(long long a, long long b)
{
    long long q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* (year, month, day) of a day number (H. Hinnant's civil_from_days, as sparktext.py). */
static void
civil(long long days, int *y, int *m, int *d)
{
    long long z = days + 719468;
    long long era = floor_div(z, 146097);
    long long doe = z - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long long mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

static inline void
put_digits(Out *o, long long v, int width)
{
    char *w = o->buf + o->len + width;
    for (int i = 0; i < width; i++) {
        *--w = (char)('0' + v % 10);
        v /= 10;
    }
    o->len += (size_t)width;
}

/* yyyy-MM-dd of a day inside [DAY_MIN, DAY_MAX]; the caller reserved the room. */
static void
put_date(Out *o, long long days)
{
    int y, m, d;
    civil(days, &y, &m, &d);
    put_digits(o, y, 4);
    put(o, "-", 1);
    put_digits(o, m, 2);
    put(o, "-", 1);
    put_digits(o, d, 2);
}

/* yyyy-MM-ddTHH:mm:ss.SSS of local seconds and milliseconds, or 1 when out of range. */
static int
put_local_time(Out *o, long long sec, long long ms)
{
    long long days = floor_div(sec, SEC_PER_DAY);
    if (days < DAY_MIN || days > DAY_MAX)
        return 1;
    long long rest = sec - days * SEC_PER_DAY;
    put_date(o, days);
    put(o, "T", 1);
    put_digits(o, rest / 3600, 2);
    put(o, ":", 1);
    put_digits(o, rest / 60 % 60, 2);
    put(o, ":", 1);
    put_digits(o, rest % 60, 2);
    put(o, ".", 1);
    put_digits(o, ms, 3);
    return 0;
}

/* Append the str a Python function returns for `arg` (a new reference, consumed; with
 * `unpack`, a tuple of the arguments). 0 = done,
 * 1 = it raised (the row goes back to Python, which raises with its context), -1 = error. */
static int
put_call(Out *o, PyObject *fn, PyObject *arg, int unpack)
{
    if (arg == NULL)
        return -1;
    PyObject *text = unpack ? PyObject_CallObject(fn, arg) : PyObject_CallOneArg(fn, arg);
    Py_DECREF(arg);
    if (text == NULL) {
        PyErr_Clear();
        return 1;
    }
    Py_ssize_t n;
    const char *utf8 = PyUnicode_Check(text) ? PyUnicode_AsUTF8AndSize(text, &n) : NULL;
    int rc = 1;
    if (utf8 == NULL)
        PyErr_Clear(); /* a lone surrogate: Python's own path reports it */
    else if (out_reserve(o, (size_t)n) < 0)
        rc = -1;
    else {
        put(o, utf8, (size_t)n);
        rc = 0;
    }
    Py_DECREF(text);
    return rc;
}

/* Double.toString of Java 17 via Python's shortest digits, re-laid out as Java does
 * (app/render/java_text.py java_double_to_string): the same digits for normal doubles below
 * 2**53 that are not powers of two; those others go to Python's exact port. */
static int
put_double(Out *o, const Field *f, double x)
{
    if (x == 0.0) {
        if (signbit(x))
            put(o, "-0.0", 4);
        else
            put(o, "0.0", 3);
        return 0;
    }
    if (isnan(x)) {
        put(o, "\"NaN\"", 5);
        return 0;
    }
    if (isinf(x)) {
        if (x < 0)
            put(o, "\"-Infinity\"", 11);
        else
            put(o, "\"Infinity\"", 10);
        return 0;
    }
    int e2;
    double a = fabs(x);
    if (a >= 9007199254740992.0 || a < 2.2250738585072014e-308 || frexp(a, &e2) == 0.5)
        return put_call(o, f->fn, PyFloat_FromDouble(x), 0);
    char *r = PyOS_double_to_string(x, 'r', 0, 0, NULL);
    if (r == NULL)
        return -1;
    char all[40];
    int n = 0, ip = 0, ex = 0, neg = 0;
    const char *q = r;
    if (*q == '-') {
        neg = 1;
        q++;
    }
    for (; *q >= '0' && *q <= '9' && n < 32; q++, ip++)
        all[n++] = *q;
    if (*q == '.')
        for (q++; *q >= '0' && *q <= '9' && n < 32; q++)
            all[n++] = *q;
    if (*q == 'e')
        ex = atoi(q + 1);
    PyMem_Free(r);
    int lead = 0, end = n;
    while (lead < n && all[lead] == '0')
        lead++;
    while (end > lead && all[end - 1] == '0')
        end--;
    const char *dg = all + lead;
    int nd = end - lead, e = ip - lead + ex;
    if (neg)
        put(o, "-", 1);
    if (e > 0 && e < 8) {
        if (nd <= e) {
            put(o, dg, (size_t)nd);
            for (int i = nd; i < e; i++)
                put(o, "0", 1);
            put(o, ".0", 2);
        }
        else {
            put(o, dg, (size_t)e);
            put(o, ".", 1);
            put(o, dg + e, (size_t)(nd - e));
        }
    }
    else if (e > -3 && e <= 0) {
        put(o, "0.", 2);
        for (int i = e; i < 0; i++)
            put(o, "0", 1);
        put(o, dg, (size_t)nd);
    }
    else {
        put(o, dg, 1);
        put(o, ".", 1);
        if (nd > 1)
            put(o, dg + 1, (size_t)(nd - 1));
        else
            put(o, "0", 1);
        put(o, "E", 1);
        put_int(o, e - 1);
    }
    return 0;
}

/* BigDecimal.toString of a compact decimal (app/render/java_text.py bigdecimal_to_string). */
static void
put_decimal(Out *o, int64_t unscaled, long long scale)
{
    char tmp[24];
    char *end = tmp + sizeof(tmp), *w = end;
    uint64_t u = unscaled < 0 ? (uint64_t)0 - (uint64_t)unscaled : (uint64_t)unscaled;
    do {
        *--w = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    long long n = end - w;
    if (scale == 0) {
        put_int(o, unscaled);
        return;
    }
    if (unscaled < 0)
        put(o, "-", 1);
    long long adjusted = n - 1 - scale;
    if (scale > 0 && adjusted >= -6) {
        if (n > scale) {
            put(o, w, (size_t)(n - scale));
            put(o, ".", 1);
            put(o, w + n - scale, (size_t)scale);
        }
        else {
            put(o, "0.", 2);
            for (long long i = n; i < scale; i++)
                put(o, "0", 1);
            put(o, w, (size_t)n);
        }
        return;
    }
    put(o, w, 1);
    if (n > 1) {
        put(o, ".", 1);
        put(o, w + 1, (size_t)(n - 1));
    }
    if (adjusted) {
        put(o, adjusted > 0 ? "E+" : "E", adjusted > 0 ? 2 : 1);
        put_int(o, adjusted);
    }
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Jackson's writeBinary: standard base64, padded, in quotes. */
static int
put_base64(Out *o, const unsigned char *s, Py_ssize_t n)
{
    if (out_reserve(o, (size_t)(n + 2) / 3 * 4 + 2) < 0)
        return -1;
    char *w = o->buf + o->len;
    *w++ = '"';
    Py_ssize_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        *w++ = B64[v >> 18];
        *w++ = B64[(v >> 12) & 63];
        *w++ = B64[(v >> 6) & 63];
        *w++ = B64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)s[i + 1] << 8;
        *w++ = B64[v >> 18];
        *w++ = B64[(v >> 12) & 63];
        *w++ = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        *w++ = '=';
    }
    *w++ = '"';
    o->len = (size_t)(w - o->buf);
    return 0;
}

/* One non-null fixed-width value of the new codes; the caller reserved 64 bytes. */
static int
put_fixed(Out *o, const Field *f, const unsigned char *slot)
{
    switch (f->code) {
    case T_DOUBLE: {
        uint64_t bits = le64(slot);
        double x;
        memcpy(&x, &bits, 8);
        return put_double(o, f, x);
    }
    case T_FLOAT: {
        uint32_t bits = le32(slot);
        float x;
        memcpy(&x, &bits, 4);
        return put_call(o, f->fn, PyFloat_FromDouble((double)x), 0);
    }
    case T_DATE: {
        long long days = (int32_t)le32(slot);
        if (days < DAY_MIN || days > DAY_MAX)
            return put_call(o, f->fn, PyLong_FromLongLong(days), 0);
        put(o, "\"", 1);
        put_date(o, days);
        put(o, "\"", 1);
        return 0;
    }
    case T_TS: {
        long long micros = (int64_t)le64(slot);
        long long sec = floor_div(micros, US_PER_SEC);
        long long ms = (micros - sec * US_PER_SEC) / 1000;
        size_t mark = o->len;
        put(o, "\"", 1);
        if (put_local_time(o, sec + f->param, ms)) {
            o->len = mark;
            return put_call(o, f->fn, PyLong_FromLongLong(micros), 0);
        }
        if (out_reserve(o, (size_t)f->extra_len) < 0)
            return -1;
        put(o, f->extra, (size_t)f->extra_len);
        return 0;
    }
    case T_NTZ: {
        long long micros = (int64_t)le64(slot);
        long long sec = floor_div(micros, US_PER_SEC);
        long long ms = (micros - sec * US_PER_SEC) / 1000;
        size_t mark = o->len;
        put(o, "\"", 1);
        if (put_local_time(o, sec, ms)) {
            o->len = mark;
            return put_call(o, f->fn, PyLong_FromLongLong(micros), 0);
        }
        put(o, "\"", 1);
        return 0;
    }
    case T_DECIMAL:
        put_decimal(o, (int64_t)le64(slot), f->param);
        return 0;
    case T_CALL4:
        return put_call(o, f->fn, PyLong_FromLong((long)(int32_t)le32(slot)), 0);
    default: /* T_CALL8 */
        return put_call(o, f->fn, PyLong_FromLongLong((long long)(int64_t)le64(slot)), 0);
    }
}

/* The JSON object of the struct at [base, end) of buf (len buflen). 0 = done, 1 = the
 * row is one for Python (it raises or renders it), -1 = Python error. Bounds are those of
 * the generated Python: the fixed region against the whole buffer (struct.unpack_from),
 * variable-length values against the struct holding them. */
/* A row's bytes; `obj` is the bytes object holding them, made only when a field's Python
 * function needs it (`owned` then says the caller releases it). */
typedef struct {
    const unsigned char *buf;
    Py_ssize_t len;
    PyObject *obj;
    int owned;
} RowBuf;

static PyObject *
row_object(RowBuf *r)
{
    if (r->obj == NULL) {
        r->obj = PyBytes_FromStringAndSize((const char *)r->buf, r->len);
        r->owned = r->obj != NULL;
    }
    return r->obj;
}

static int
put_struct(Out *o, const Plan *p, RowBuf *r, Py_ssize_t base, Py_ssize_t end, int depth)
{
    if (p->n == 0) {
        if (out_reserve(o, 2) < 0)
            return -1;
        put(o, "{}", 2);
        return 0;
    }
    const unsigned char *buf = r->buf;
    Py_ssize_t buflen = r->len;
    if (base + p->fixed > buflen)
        return 1;
    const unsigned char *row = buf + base;
    const unsigned char *slots = row + 8 * p->words;
    int first = 1;
    if (out_reserve(o, 1) < 0)
        return -1;
    put(o, "{", 1);
    for (Py_ssize_t i = 0; i < p->n; i++) {
        if ((le64(row + 8 * (i >> 6)) >> (i & 63)) & 1)
            continue; /* null: left out, as Spark's ignoreNullFields does */
        const Field *f = &p->fields[i];
        const unsigned char *slot = slots + 8 * i;
        /* name + the longest fixed value ("+1234-12-31T23:59:59.999+05:30:00" and the like) */
        if (out_reserve(o, (size_t)f->name_len + 64 + (size_t)f->extra_len) < 0)
            return -1;
        if (!first)
            put(o, ",", 1);
        first = 0;
        put(o, f->name, (size_t)f->name_len);
        switch (f->code) {
        case T_VOID:
            put(o, "null", 4);
            break;
        case T_BOOL:
            if (slot[0])
                put(o, "true", 4);
            else
                put(o, "false", 5);
            break;
        case T_BYTE:
            put_int(o, (int8_t)slot[0]);
            break;
        case T_SHORT:
            put_int(o, (int16_t)(uint16_t)(slot[0] | (slot[1] << 8)));
            break;
        case T_INT:
            put_int(o, (int32_t)le32(slot));
            break;
        case T_LONG:
            put_int(o, (int64_t)le64(slot));
            break;
        case T_STRING:
        case T_STRUCT:
        case T_BINARY:
        case T_CALLVAR: {
            Py_ssize_t size = (Py_ssize_t)le32(slot);
            Py_ssize_t off = (Py_ssize_t)le32(slot + 4) + base;
            if (off + size > end)
                return 1;
            int rc;
            if (f->code == T_STRING)
                rc = put_string(o, buf + off, size);
            else if (f->code == T_BINARY)
                rc = put_base64(o, buf + off, size);
            else if (f->code == T_CALLVAR) {
                PyObject *obj = row_object(r);
                rc = obj == NULL ? -1
                                 : put_call(o, f->fn,
                                            Py_BuildValue("(Onnn)", obj, off, size, end), 1);
            }
            else if (depth >= 64)
                rc = 1;
            else
                rc = put_struct(o, f->sub, r, off, off + size, depth + 1);
            if (rc)
                return rc;
            break;
        }
        default: {
            int rc = put_fixed(o, f, slot);
            if (rc)
                return rc;
        }
        }
    }
    if (out_reserve(o, 1) < 0)
        return -1;
    put(o, "}", 1);
    return 0;
}

/* One line: {"key":K,"value":V,"partition_id":N}\n; the value left out when NULL. */
static int
put_line_rows(Out *o, const LinePlan *lp, RowBuf *k, RowBuf *v, const char *tail,
              size_t tail_len)
{
    if (out_reserve(o, 7) < 0)
        return -1;
    put(o, "{\"key\":", 7);
    int rc = put_struct(o, lp->key, k, 0, k->len, 0);
    if (rc)
        return rc;
    if (v != NULL) {
        if (out_reserve(o, 9) < 0)
            return -1;
        put(o, ",\"value\":", 9);
        rc = put_struct(o, lp->value, v, 0, v->len, 0);
        if (rc)
            return rc;
    }
    if (out_reserve(o, tail_len) < 0)
        return -1;
    put(o, tail, tail_len);
    return 0;
}

/* put_line_rows for a (key, value or None) pair of bytes objects. With `skip`, both start
 * with a version byte 0 that is not part of the row (RocksDB's UnsafeRow encoding); any
 * other first byte, or no value, is a row for Python. */
static int
put_line(Out *o, const LinePlan *lp, PyObject *kb, PyObject *vb, const char *tail,
         size_t tail_len, int skip)
{
    if (!PyBytes_CheckExact(kb) || (vb != Py_None && !PyBytes_CheckExact(vb)))
        return 1;
    RowBuf k = {(const unsigned char *)PyBytes_AS_STRING(kb), PyBytes_GET_SIZE(kb), kb, 0};
    if (vb == Py_None) {
        if (skip)
            return 1;
        return put_line_rows(o, lp, &k, NULL, tail, tail_len);
    }
    RowBuf v = {(const unsigned char *)PyBytes_AS_STRING(vb), PyBytes_GET_SIZE(vb), vb, 0};
    if (skip) {
        if (k.len < 1 || k.buf[0] != 0 || v.len < 1 || v.buf[0] != 0)
            return 1;
        /* Rows inside the stored bytes: a bytes object of each is made only if needed. */
        k = (RowBuf){k.buf + 1, k.len - 1, NULL, 0};
        v = (RowBuf){v.buf + 1, v.len - 1, NULL, 0};
    }
    int rc = put_line_rows(o, lp, &k, &v, tail, tail_len);
    if (k.owned)
        Py_DECREF(k.obj);
    if (v.owned)
        Py_DECREF(v.obj);
    return rc;
}

static PyObject *
render_lines(PyObject *self, PyObject *args)
{
    PyObject *capsule, *pairs;
    long long pid;
    int skip = 0;
    if (!PyArg_ParseTuple(args, "OOL|p:render_lines", &capsule, &pairs, &pid, &skip))
        return NULL;
    LinePlan *lp = PyCapsule_GetPointer(capsule, PLAN_CAPSULE);
    if (lp == NULL)
        return NULL;
    char tail[48];
    int tail_len = PyOS_snprintf(tail, sizeof(tail), ",\"partition_id\":%lld}\n", pid);
    PyObject *it = PyObject_GetIter(pairs);
    if (it == NULL)
        return NULL;
    Out o = {NULL, 0, 0};
    PyObject *pending = NULL, *item, *result = NULL;
    Py_ssize_t rows = 0;
    while ((item = PyIter_Next(it)) != NULL) {
        size_t mark = o.len;
        int rc = 1;
        if (PyTuple_CheckExact(item) && PyTuple_GET_SIZE(item) == 2)
            rc = put_line(&o, lp, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1), tail,
                          (size_t)tail_len, skip);
        if (rc < 0) {
            Py_DECREF(item);
            goto done;
        }
        if (rc > 0) {
            o.len = mark; /* drop the half-written line; Python renders this pair */
            pending = item;
            break;
        }
        Py_DECREF(item);
        rows++;
    }
    if (pending == NULL && PyErr_Occurred())
        goto done;
    PyObject *blob = PyBytes_FromStringAndSize(o.buf ? o.buf : "", (Py_ssize_t)o.len);
    if (blob != NULL)
        result = Py_BuildValue("(NOn)", blob, pending ? pending : Py_None, rows);
done:
    Py_XDECREF(pending);
    Py_DECREF(it);
    PyMem_Free(o.buf);
    return result;
}

/* ------------------------------------------------------------------------------------------
 * An HDFS store's chain (snapshot + deltas) merged and rendered without a Python object a row
 * ------------------------------------------------------------------------------------------ */

/* A key's newest record: its value, or vlen -1 once removed. Entries stay in the order keys
 * first appeared, as a Python dict updated file by file keeps them. */
typedef struct {
    const unsigned char *key, *val;
    uint64_t hash;
    int32_t klen, vlen;
} Entry;

typedef struct {
    Entry *entries;
    Py_ssize_t n, cap;
    /* Low 32 bits: entry index + 1 (0 = empty); high 32: the key's hash, so that probing
     * rarely has to look at an entry (a cache miss each in a big partition). */
    uint64_t *slots;
    size_t mask;
    /* The entries the table may come to hold: those it holds, and one for each record of
     * the files still to merge, at the record size seen so far. A table that must grow
     * grows to that at once (deltas of new keys would have it re-hashed twice a file). */
    size_t expect;
} Table;

#define SLOT_TAG(h) ((h) & 0xFFFFFFFF00000000ULL)

static inline uint64_t
hash_bytes(const unsigned char *p, Py_ssize_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, (size_t)n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

static int
table_grow(Table *t, size_t want)
{
    size_t size = t->slots ? (t->mask + 1) * 2 : 1 << 12;
    while (size < want)
        size *= 2;
    uint64_t *slots = PyMem_RawCalloc(size, sizeof(uint64_t));
    if (slots == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        uint64_t h = t->entries[i].hash;
        size_t j = (size_t)h & (size - 1);
        while (slots[j])
            j = (j + 1) & (size - 1);
        slots[j] = SLOT_TAG(h) | (uint64_t)(i + 1);
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->mask = size - 1;
    return 0;
}

/* Record the newest value of rec's key (vlen -1: removed), its hash already taken. 0 = done,
 * -1 = out of memory (no Python error set: a merge runs without the GIL). */
static int
table_set(Table *t, const Entry *rec)
{
    size_t want = t->expect > (size_t)t->n + 1 ? t->expect : (size_t)t->n + 1;
    if (t->slots == NULL || (size_t)(t->n + 1) * 2 > t->mask + 1) {
        if (t->n >= 0x7fffffff || table_grow(t, 2 * want) < 0)
            return -1;
    }
    uint64_t h = rec->hash;
    size_t j = (size_t)h & t->mask;
    uint64_t slot;
    while ((slot = t->slots[j]) != 0) {
        if (SLOT_TAG(slot) == SLOT_TAG(h)) {
            Entry *e = &t->entries[(slot & 0xFFFFFFFFULL) - 1];
            if (e->hash == h && e->klen == rec->klen &&
                memcmp(e->key, rec->key, (size_t)rec->klen) == 0) {
                e->val = rec->val;
                e->vlen = rec->vlen;
                return 0;
            }
        }
        j = (j + 1) & t->mask;
    }
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 1 << 12;
        if ((size_t)cap < want)
            cap = want < 0x7fffffff ? (Py_ssize_t)want : 0x7fffffff;
        Entry *entries = PyMem_RawRealloc(t->entries, (size_t)cap * sizeof(Entry));
        if (entries == NULL)
            return -1;
        t->entries = entries;
        t->cap = cap;
    }
    t->entries[t->n] = *rec;
    t->slots[j] = SLOT_TAG(h) | (uint64_t)(++t->n);
    return 0;
}

/* Records applied to a table AHEAD behind the walk that finds them. A big partition's table
 * is several times the cache, and a record that updates a key waits on memory three times
 * in a row: its slot, the entry the slot names, that entry's key (in an older file). So
 * each record's slot is fetched as it is found, its entry a third of the way to its turn,
 * and the entry's key two thirds of the way: at its turn all three are in the cache (a
 * 10M-key chain merged ~2x as fast). The records are still applied in file order; a fetch
 * made stale by the table growing costs only its miss. */
#define AHEAD 24
#define AHEAD_RING 32 /* a power of two above AHEAD */

typedef struct {
    Entry rec;
    uint32_t guess; /* the entry the record's slot named, + 1; 0 = none */
} Pending;

typedef struct {
    Table *t;
    Pending ring[AHEAD_RING];
    uint64_t found;
} Ahead;

static int
ahead_visit(void *ctx, const unsigned char *k, int32_t klen, const unsigned char *v,
            int32_t vlen)
{
    Ahead *a = ctx;
    Table *t = a->t;
    uint64_t i = a->found++;
    Pending *p = &a->ring[i % AHEAD_RING];
    p->rec = (Entry){k, v, hash_bytes(k, klen), klen, vlen};
    p->guess = 0;
    __builtin_prefetch(&t->slots[p->rec.hash & t->mask]);
    if (i >= AHEAD / 3) {
        Pending *q = &a->ring[(i - AHEAD / 3) % AHEAD_RING];
        uint64_t slot = t->slots[q->rec.hash & t->mask];
        if (slot != 0 && SLOT_TAG(slot) == SLOT_TAG(q->rec.hash)) {
            q->guess = (uint32_t)(slot & 0xFFFFFFFFULL);
            __builtin_prefetch(&t->entries[q->guess - 1]);
        }
    }
    if (i >= 2 * AHEAD / 3) {
        Pending *q = &a->ring[(i - 2 * AHEAD / 3) % AHEAD_RING];
        if (q->guess != 0 && q->guess <= t->n)
            __builtin_prefetch(t->entries[q->guess - 1].key);
    }
    if (i >= AHEAD)
        return table_set(t, &a->ring[(i - AHEAD) % AHEAD_RING].rec);
    return 0;
}

/* Apply the records still waiting, in order. 0 = done, -1 = out of memory. */
static int
ahead_drain(Ahead *a)
{
    for (uint64_t i = a->found > AHEAD ? a->found - AHEAD : 0; i < a->found; i++)
        if (table_set(a->t, &a->ring[i % AHEAD_RING].rec) < 0)
            return -1;
    a->found = 0;
    return 0;
}

static void
table_free(Table *t)
{
    PyMem_RawFree(t->entries);
    PyMem_RawFree(t->slots);
}

/* Merge a chain's held views (views[0] the snapshot, maybe absent) into t, without touching a
 * Python object. 1 = merged, 0 = a stream is not clean, -1 = out of memory. */
static int
table_merge(Table *t, const Py_buffer *views, const int *held, Py_ssize_t nviews)
{
    Ahead ahead;
    ahead.t = t;
    ahead.found = 0;
    Py_ssize_t rest = 0, walked = 0;
    for (Py_ssize_t i = 0; i < nviews; i++)
        rest += held[i] ? views[i].len : 0;
    for (Py_ssize_t i = 0; i < nviews; i++) {
        if (!held[i])
            continue;
        /* At least 16 bytes a record, usually ~50: 24 until a file says. */
        size_t record = ahead.found ? (size_t)walked / ahead.found : 24;
        t->expect = (size_t)t->n + (size_t)rest / (record ? record : 1);
        rest -= views[i].len;
        walked += views[i].len;
        if (t->slots == NULL) {
            /* Sized for the first file's records (at least 16 bytes each, usually ~50):
             * growing a big table step by step re-hashes it each time. */
            if (table_grow(t, (size_t)(views[i].len / 24) + 16) < 0)
                return -1;
        }
        /* A snapshot holds no removals; a delta may. The records of one file still
         * waiting are applied before the next file's, in the ring's order. */
        int rc = walk_stream(views[i].buf, views[i].len, i > 0, 0, ahead_visit, &ahead);
        if (rc <= 0)
            return rc;
    }
    return ahead_drain(&ahead) < 0 ? -1 : 1;
}

/* A chain's files held as buffers (views[0] the snapshot, unless None; then the deltas) and
 * merged into a table whose entries point into them: both live until chain_release. */
typedef struct {
    PyObject *seq;
    Py_buffer *views;
    int *held;
    Py_ssize_t nviews;
    Table t;
} Chain;

/* Hold the files and merge them, without the GIL (a merge touches no Python object).
 * 1 = merged, 0 = a stream is not clean, -1 = Python error set; chain_release either way. */
static int
chain_merge(Chain *c, PyObject *snapshot, PyObject *deltas, const char *not_a_sequence)
{
    c->seq = PySequence_Fast(deltas, not_a_sequence);
    if (c->seq == NULL)
        return -1;
    c->nviews = PySequence_Fast_GET_SIZE(c->seq) + 1;
    c->views = PyMem_Calloc((size_t)c->nviews, sizeof(Py_buffer));
    c->held = PyMem_Calloc((size_t)c->nviews, sizeof(int));
    if (c->views == NULL || c->held == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < c->nviews; i++) {
        PyObject *obj = i == 0 ? snapshot : PySequence_Fast_GET_ITEM(c->seq, i - 1);
        if (obj == Py_None && i == 0)
            continue;
        if (PyObject_GetBuffer(obj, &c->views[i], PyBUF_SIMPLE) < 0)
            return -1;
        c->held[i] = 1;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = table_merge(&c->t, c->views, c->held, c->nviews);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        PyErr_NoMemory();
    return rc;
}

static void
chain_release(Chain *c)
{
    for (Py_ssize_t i = 0; c->views != NULL && c->held != NULL && i < c->nviews; i++)
        if (c->held[i])
            PyBuffer_Release(&c->views[i]);
    PyMem_Free(c->views);
    PyMem_Free(c->held);
    table_free(&c->t);
    Py_XDECREF(c->seq);
}

/* The chunk rendered so far as bytes, appended to parts; the buffer starts again. */
static int
flush_part(Out *o, PyObject *parts)
{
    PyObject *chunk = PyBytes_FromStringAndSize(o->buf ? o->buf : "", (Py_ssize_t)o->len);
    if (chunk == NULL)
        return -1;
    int rc = PyList_Append(parts, chunk);
    Py_DECREF(chunk);
    o->len = 0;
    return rc;
}

/* Render every live entry; a row the plan does not render goes into parts as a
 * (key, value) pair of bytes, in its place, for Python. The rows rendered, or -1. */
static Py_ssize_t
render_table(const Table *t, const LinePlan *lp, const char *tail, size_t tail_len,
             PyObject *parts)
{
    Out o = {NULL, 0, 0};
    Py_ssize_t rows = 0;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        const Entry *e = &t->entries[i];
        if (e->vlen < 0)
            continue;
        RowBuf k = {e->key, e->klen, NULL, 0}, v = {e->val, e->vlen, NULL, 0};
        size_t mark = o.len;
        int rc = put_line_rows(&o, lp, &k, &v, tail, tail_len);
        if (k.owned)
            Py_DECREF(k.obj);
        if (v.owned)
            Py_DECREF(v.obj);
        if (rc == 0) {
            rows++;
            continue;
        }
        if (rc < 0)
            goto error;
        o.len = mark; /* drop the half-written line */
        if (flush_part(&o, parts) < 0)
            goto error;
        PyObject *pair = Py_BuildValue("(y#y#)", (const char *)e->key, (Py_ssize_t)e->klen,
                                       (const char *)e->val, (Py_ssize_t)e->vlen);
        if (pair == NULL)
            goto error;
        rc = PyList_Append(parts, pair);
        Py_DECREF(pair);
        if (rc < 0)
            goto error;
    }
    if (flush_part(&o, parts) < 0)
        goto error;
    PyMem_Free(o.buf);
    return rows;
error:
    PyMem_Free(o.buf);
    return -1;
}

static PyObject *
render_chain(PyObject *self, PyObject *args)
{
    PyObject *capsule, *snapshot, *deltas;
    long long pid;
    if (!PyArg_ParseTuple(args, "OOOL:render_chain", &capsule, &snapshot, &deltas, &pid))
        return NULL;
    LinePlan *lp = PyCapsule_GetPointer(capsule, PLAN_CAPSULE);
    if (lp == NULL)
        return NULL;
    Chain c = {0};
    PyObject *result = NULL, *parts = NULL;
    int rc = chain_merge(&c, snapshot, deltas, "render_chain: deltas must be a sequence");
    if (rc < 0)
        goto done;
    if (rc == 0) {
        result = Py_NewRef(Py_None); /* not clean: the careful parser names the problem */
        goto done;
    }
    char tail[48];
    int tail_len = PyOS_snprintf(tail, sizeof(tail), ",\"partition_id\":%lld}\n", pid);
    parts = PyList_New(0);
    if (parts == NULL)
        goto done;
    Py_ssize_t rows = render_table(&c.t, lp, tail, (size_t)tail_len, parts);
    if (rows >= 0)
        result = Py_BuildValue("(On)", parts, rows);
done:
    Py_XDECREF(parts);
    chain_release(&c);
    return result;
}

/* One side (0: keys, 1: values) of every live entry as Arrow large_binary buffers: offsets
 * and data, filled without the GIL. NULL with a Python error on failure. */
static PyObject *
table_column(const Table *t, int side, Py_ssize_t rows)
{
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        const Entry *e = &t->entries[i];
        if (e->vlen >= 0)
            total += side == 0 ? e->klen : e->vlen;
    }
    PyObject *offsets = PyBytes_FromStringAndSize(NULL, (rows + 1) * (Py_ssize_t)sizeof(int64_t));
    PyObject *data = offsets == NULL ? NULL : PyBytes_FromStringAndSize(NULL, total);
    if (data == NULL) {
        Py_XDECREF(offsets);
        return NULL;
    }
    int64_t *at = (int64_t *)PyBytes_AS_STRING(offsets);
    char *out = PyBytes_AS_STRING(data);
    Py_BEGIN_ALLOW_THREADS
    int64_t pos = 0;
    Py_ssize_t row = 0;
    at[0] = 0;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        const Entry *e = &t->entries[i];
        if (e->vlen < 0)
            continue;
        const unsigned char *from = side == 0 ? e->key : e->val;
        int32_t size = side == 0 ? e->klen : e->vlen;
        memcpy(out + pos, from, (size_t)size);
        pos += size;
        at[++row] = pos;
    }
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(NN)", offsets, data);
}

/* ------------------------------------------------------------------------------------------
 * UnsafeRows of fixed-width and byte-string fields, as Arrow columns
 * ------------------------------------------------------------------------------------------ */

/* The field sizes of `sizes` (a tuple) into `out`: 1, 2, 4 or 8 for a fixed-width field, 0
 * (where `variable` allows it) for a string or binary. The field count (1 to 64), or -1
 * with a ValueError. */
static Py_ssize_t
field_sizes(PyObject *sizes, int *out, int variable, const char *who)
{
    Py_ssize_t n = PyTuple_GET_SIZE(sizes);
    if (n < 1 || n > 64) {
        PyErr_Format(PyExc_ValueError, "%s: 1 to 64 fields", who);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long size = PyLong_AsLong(PyTuple_GET_ITEM(sizes, i));
        if ((size != 0 || !variable) && size != 1 && size != 2 && size != 4 && size != 8) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: a size is %s1, 2, 4 or 8", who,
                             variable ? "0, " : "");
            return -1;
        }
        out[i] = (int)size;
    }
    return n;
}

/* Field i of the UnsafeRow at `row` (of `words` null-bitset words) into row r of its
 * column: its null bit into `bits` (set: valid), and for a fixed-width field (size > 0) its
 * slot's first `size` bytes into `out`. 1 when the field is null. */
static inline int
field_take(const unsigned char *row, Py_ssize_t words, Py_ssize_t i, int size,
           unsigned char *out, unsigned char *bits, Py_ssize_t r)
{
    int null = (le64(row + 8 * (i >> 6)) >> (i & 63)) & 1;
    if (!null)
        bits[r >> 3] |= (unsigned char)(1u << (r & 7));
    if (size)
        memcpy(out + r * size, row + 8 * (words + i), (size_t)size);
    return null;
}

/* The values a merge takes when every field of their rows is fixed-width: each field's
 * column and validity (a bit set: valid), filled as the rows come, so that no column of
 * whole rows is written only to be decoded after. `rows` so far, room for `cap`. */
typedef struct {
    Py_ssize_t nfields, words, width, rows, cap;
    int sizes[64];
    unsigned char *out[64], *bits[64];
    Py_ssize_t nulls[64];
} Fields;

/* Room for `cap` rows (more than now). 0 = done, -2 = out of memory. */
static int
fields_grow(Fields *f, Py_ssize_t cap)
{
    size_t had = (size_t)(f->cap + 7) / 8, bytes = (size_t)(cap + 7) / 8;
    for (Py_ssize_t i = 0; i < f->nfields; i++) {
        unsigned char *out = PyMem_RawRealloc(f->out[i], (size_t)(cap * f->sizes[i]));
        if (out == NULL)
            return -2;
        f->out[i] = out;
        unsigned char *bits = PyMem_RawRealloc(f->bits[i], bytes);
        if (bits == NULL)
            return -2;
        memset(bits + had, 0, bytes - had);
        f->bits[i] = bits;
    }
    f->cap = cap;
    return 0;
}

/* The fields of one value row. 1 = taken, 0 = a row shorter than its null bitset and
 * slots (not clean), -2 = out of memory. */
static inline int
fields_put(Fields *f, const unsigned char *row, size_t len)
{
    if ((Py_ssize_t)len < f->width)
        return 0;
    if (f->rows == f->cap && fields_grow(f, f->cap * 2) < 0)
        return -2;
    Py_ssize_t r = f->rows++;
    for (Py_ssize_t i = 0; i < f->nfields; i++)
        f->nulls[i] += field_take(row, f->words, i, f->sizes[i], f->out[i], f->bits[i], r);
    return 1;
}

/* `f` for value rows of the fields `sizes` (a tuple; fixed-width sizes only). 0, or -1
 * with a Python error. */
static int
fields_setup(Fields *f, PyObject *sizes, const char *who)
{
    if (!PyTuple_Check(sizes)) {
        PyErr_Format(PyExc_TypeError, "%s: value_sizes must be a tuple or None", who);
        return -1;
    }
    f->nfields = field_sizes(sizes, f->sizes, 0, who);
    if (f->nfields < 0) {
        f->nfields = 0;
        return -1;
    }
    f->words = (f->nfields + 63) / 64;
    f->width = 8 * (f->words + f->nfields);
    return 0;
}

static void
fields_free(Fields *f)
{
    for (Py_ssize_t i = 0; i < f->nfields; i++) {
        PyMem_RawFree(f->out[i]);
        PyMem_RawFree(f->bits[i]);
    }
}

/* Per field (values, validity or None, null count, None), as flat_struct gives them,
 * handed over as they are (the Fields keeps none of them). */
static PyObject *
fields_buffers(Fields *f)
{
    PyObject *result = PyList_New(f->nfields);
    for (Py_ssize_t i = 0; result != NULL && i < f->nfields; i++) {
        PyObject *values = owned_bytes(f->out[i], f->rows * f->sizes[i]);
        if (values == NULL) {
            Py_CLEAR(result);
            break;
        }
        f->out[i] = NULL;
        PyObject *valid = Py_None;
        if (f->nulls[i]) {
            valid = owned_bytes(f->bits[i], (f->rows + 7) / 8);
            if (valid == NULL) {
                Py_DECREF(values);
                Py_CLEAR(result);
                break;
            }
            f->bits[i] = NULL;
        }
        else
            Py_INCREF(valid);
        PyObject *field = Py_BuildValue("(OOnO)", values, valid, f->nulls[i], Py_None);
        Py_DECREF(values);
        Py_DECREF(valid);
        if (field == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, field);
    }
    return result;
}

/* flat_struct(offsets, data, first, rows, sizes): the fields of `rows` UnsafeRows (Arrow
 * large_binary buffers: int64 offsets from index `first`, and the bytes), as Arrow buffers,
 * per field (values, validity or None, null count, offsets or None), as parsers/columnar.py's
 * numpy path makes them. sizes[i] is a fixed-width field's size in its slot (1, 2, 4 or 8),
 * or 0 for a string or binary field: its slot is (offset << 32) | size, the offset from the
 * row's start, and it comes out as int32 offsets and the bytes (an empty span where null).
 * None when a row is shorter than its null bitset and slots, a span runs past its row, or a
 * field's bytes outgrow int32 offsets (that path then decides). The rows are read without
 * the GIL; a string's UTF-8 is left for the caller to check. */
static PyObject *
flat_struct(PyObject *self, PyObject *args)
{
    Py_buffer offsets, data;
    Py_ssize_t first, n;
    PyObject *sizes_arg;
    if (!PyArg_ParseTuple(args, "y*y*nnO!:flat_struct", &offsets, &data, &first, &n,
                          &PyTuple_Type, &sizes_arg))
        return NULL;
    PyObject *result = NULL, *values = NULL, *valid = NULL, *spans = NULL;
    int sizes[64];
    int variable = 0;
    Py_ssize_t nfields = field_sizes(sizes_arg, sizes, 1, "flat_struct");
    if (nfields < 0)
        goto done;
    if (first < 0 || n < 0 || (first + n + 1) * (Py_ssize_t)sizeof(int64_t) > offsets.len) {
        PyErr_SetString(PyExc_ValueError, "flat_struct: offsets for every row");
        goto done;
    }
    for (Py_ssize_t i = 0; i < nfields; i++)
        variable |= sizes[i] == 0;
    const int64_t *at = (const int64_t *)offsets.buf + first;
    const unsigned char *bytes = data.buf;
    Py_ssize_t words = (nfields + 63) / 64, width = 8 * (words + nfields);
    /* A first pass checks every row and sums each string field's bytes, so that the second
     * writes into buffers sized once. */
    int64_t totals[64] = {0};
    int clean = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n && clean; r++) {
        int64_t start = at[r], stop = at[r + 1];
        if (start < 0 || stop > data.len || stop - start < width) {
            clean = 0;
            break;
        }
        if (!variable)
            continue;
        const unsigned char *row = bytes + start;
        for (Py_ssize_t i = 0; i < nfields; i++) {
            if (sizes[i] != 0 || (le64(row + 8 * (i >> 6)) >> (i & 63)) & 1)
                continue;
            uint64_t slot = le64(row + 8 * (words + i));
            int64_t size = (int64_t)(slot & 0xFFFFFFFFu);
            if ((int64_t)(slot >> 32) + size > stop - start) {
                clean = 0;
                break;
            }
            totals[i] += size;
        }
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nfields && clean; i++)
        clean = totals[i] <= INT32_MAX;
    if (!clean) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    values = PyList_New(nfields);
    valid = values == NULL ? NULL : PyList_New(nfields);
    spans = valid == NULL ? NULL : PyList_New(nfields);
    if (spans == NULL)
        goto done;
    Py_ssize_t bitmap = (n + 7) / 8;
    unsigned char *out[64], *bits[64];
    int32_t *ends[64];
    for (Py_ssize_t i = 0; i < nfields; i++) {
        Py_ssize_t len = sizes[i] ? n * sizes[i] : (Py_ssize_t)totals[i];
        PyObject *v = PyBytes_FromStringAndSize(NULL, len);
        if (v == NULL)
            goto done;
        PyList_SET_ITEM(values, i, v);
        out[i] = (unsigned char *)PyBytes_AS_STRING(v);
        PyObject *b = PyBytes_FromStringAndSize(NULL, bitmap);
        if (b == NULL)
            goto done;
        memset(PyBytes_AS_STRING(b), 0, (size_t)bitmap);
        PyList_SET_ITEM(valid, i, b);
        bits[i] = (unsigned char *)PyBytes_AS_STRING(b);
        PyObject *e = sizes[i] ? Py_NewRef(Py_None)
                               : PyBytes_FromStringAndSize(NULL, (n + 1) * sizeof(int32_t));
        if (e == NULL)
            goto done;
        PyList_SET_ITEM(spans, i, e);
        ends[i] = sizes[i] ? NULL : (int32_t *)PyBytes_AS_STRING(e);
        if (ends[i] != NULL)
            ends[i][0] = 0;
    }
    Py_ssize_t nulls[64] = {0};
    int32_t filled[64] = {0};
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        const unsigned char *row = bytes + at[r];
        for (Py_ssize_t i = 0; i < nfields; i++) {
            int null = field_take(row, words, i, sizes[i], out[i], bits[i], r);
            nulls[i] += null;
            if (sizes[i])
                continue;
            if (!null) {
                uint64_t span = le64(row + 8 * (words + i));
                uint32_t size = (uint32_t)(span & 0xFFFFFFFFu);
                memcpy(out[i] + filled[i], row + (span >> 32), size);
                filled[i] += (int32_t)size;
            }
            ends[i][r + 1] = filled[i];
        }
    }
    Py_END_ALLOW_THREADS
    result = PyList_New(nfields);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < nfields; i++) {
        PyObject *mask = nulls[i] ? PyList_GET_ITEM(valid, i) : Py_None;
        PyObject *field = Py_BuildValue("(OOnO)", PyList_GET_ITEM(values, i), mask, nulls[i],
                                        PyList_GET_ITEM(spans, i));
        if (field == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, field);
    }
done:
    Py_XDECREF(values);
    Py_XDECREF(valid);
    Py_XDECREF(spans);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    return result;
}

/* The live values of a merged chain as their fields (each value row's fields fixed-width,
 * `f` set up for them): flat_struct's fields, without a column of whole rows between. None
 * when a row is shorter than its fields. */
static PyObject *
table_fields(const Table *t, Py_ssize_t rows, Fields *f)
{
    if (fields_grow(f, rows ? rows : 1) < 0)
        return PyErr_NoMemory();
    int rc = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < t->n && rc == 1; i++) {
        const Entry *e = &t->entries[i];
        if (e->vlen >= 0)
            rc = fields_put(f, e->val, (size_t)e->vlen);
    }
    Py_END_ALLOW_THREADS
    if (rc == 0)
        return Py_NewRef(Py_None);
    return rc < 0 ? PyErr_NoMemory() : fields_buffers(f);
}

/* chain_columns(snapshot, deltas, keys, values[, value_sizes]): an HDFS chain merged as a
 * dict updated file by file would be (first appearance order, last record winning, removed
 * keys gone), its live rows' keys and values as Arrow columns, without a Python object a
 * row. With value_sizes (the value rows' fields all fixed-width, their sizes as flat_struct
 * takes them) the values come as flat_struct gives their fields. The merge runs without the
 * GIL, so partitions decode in parallel threads. None where a stream is not clean (or, with
 * value_sizes, a value row is too short for its fields). */
static PyObject *
chain_columns(PyObject *self, PyObject *args)
{
    PyObject *snapshot, *deltas, *sizes_arg = Py_None;
    int want_keys, want_values;
    if (!PyArg_ParseTuple(args, "OOpp|O:chain_columns", &snapshot, &deltas, &want_keys,
                          &want_values, &sizes_arg))
        return NULL;
    Fields fields = {0};
    int by_field = want_values && sizes_arg != Py_None;
    if (by_field && fields_setup(&fields, sizes_arg, "chain_columns") < 0)
        return NULL;
    Chain c = {0};
    PyObject *result = NULL, *keys = NULL, *values = NULL;
    int rc = chain_merge(&c, snapshot, deltas, "chain_columns: deltas must be a sequence");
    if (rc < 0)
        goto done;
    if (rc == 0) {
        result = Py_NewRef(Py_None); /* not clean: the careful parser names the problem */
        goto done;
    }
    Py_ssize_t rows = 0;
    for (Py_ssize_t i = 0; i < c.t.n; i++)
        rows += c.t.entries[i].vlen >= 0;
    keys = want_keys ? table_column(&c.t, 0, rows) : Py_NewRef(Py_None);
    values = keys == NULL     ? NULL
             : by_field       ? table_fields(&c.t, rows, &fields)
             : want_values    ? table_column(&c.t, 1, rows)
                              : Py_NewRef(Py_None);
    if (values == Py_None && by_field)
        result = Py_NewRef(Py_None);
    else if (values != NULL)
        result = Py_BuildValue("(nOO)", rows, keys, values);
done:
    Py_XDECREF(keys);
    Py_XDECREF(values);
    fields_free(&fields);
    chain_release(&c);
    return result;
}

/* gather_bytes(data, starts, sizes): the bytes data[starts[i] : starts[i] + sizes[i]] of
 * every row (int64 starts and sizes, native order) as Arrow large_binary buffers: (int64
 * offsets, bytes), copied without the GIL. None when a span is outside data (the numpy
 * path then decides). */
static PyObject *
gather_bytes(PyObject *self, PyObject *args)
{
    Py_buffer data, starts, sizes;
    if (!PyArg_ParseTuple(args, "y*y*y*:gather_bytes", &data, &starts, &sizes))
        return NULL;
    PyObject *result = NULL, *offsets = NULL, *payload = NULL;
    Py_ssize_t n = starts.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *from = starts.buf, *size = sizes.buf;
    if (sizes.len != starts.len || starts.len % (Py_ssize_t)sizeof(int64_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "gather_bytes: starts and sizes are int64, one a row");
        goto done;
    }
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (size[i] < 0 || from[i] < 0 || from[i] > data.len || size[i] > data.len - from[i]) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        total += size[i];
    }
    offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int64_t));
    payload = offsets == NULL ? NULL : PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (payload == NULL)
        goto done;
    int64_t *at = (int64_t *)PyBytes_AS_STRING(offsets);
    char *out = PyBytes_AS_STRING(payload);
    const char *src = data.buf;
    Py_BEGIN_ALLOW_THREADS
    int64_t pos = 0;
    at[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(out + pos, src + from[i], (size_t)size[i]);
        pos += size[i];
        at[i + 1] = pos;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(OO)", offsets, payload);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(payload);
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&sizes);
    return result;
}

/* ------------------------------------------------------------------------------------------
 * lz4-java's LZ4BlockOutputStream: Spark's default codec for state files and changelogs
 * ------------------------------------------------------------------------------------------ */

#define LZ4_STREAM_HEADER 21
#define LZ4_METHOD_RAW 0x10
#define LZ4_METHOD_LZ4 0x20
#define LZ4_XXH32_SEED 0x9747B28Cu
#define LZ4_CHECKSUM_MASK 0x0FFFFFFFu

/* lz4_stream(data, budget): every block of every concatenated stream in `data`, decoded
 * into one bytes object with each block's XXH32 checked, as parsers/compression/lz4.py's
 * decompress does; no Python call a block and no GIL while decoding. None on anything that
 * function would raise for (a header lz4-java refuses, a cut block, no end block, a checksum
 * mismatch, damaged LZ4, more than `budget` bytes declared): it then names the problem. */
static PyObject *
lz4_stream(PyObject *self, PyObject *args)
{
    Py_buffer in;
    long long budget;
    if (!PyArg_ParseTuple(args, "y*L:lz4_stream", &in, &budget))
        return NULL;
    const unsigned char *p = in.buf;
    Py_ssize_t size = in.len, pos = 0;
    long long total = 0;
    int ended = 0;
    PyObject *result = NULL;
    if (size == 0)
        goto refuse;
    /* Every header first, as lz4-java checks it: a bomb is refused before decoding. */
    while (pos < size) {
        if (size - pos < LZ4_STREAM_HEADER || memcmp(p + pos, "LZ4Block", 8) != 0)
            goto refuse;
        unsigned char token = p[pos + 8];
        int method = token & 0xF0;
        int32_t clen = (int32_t)le32(p + pos + 9), olen = (int32_t)le32(p + pos + 13);
        uint32_t check = le32(p + pos + 17);
        if ((method != LZ4_METHOD_RAW && method != LZ4_METHOD_LZ4) ||
            (long long)olen > (1LL << (10 + (token & 0x0F))) || olen < 0 || clen < 0 ||
            (olen == 0) != (clen == 0) || (method == LZ4_METHOD_RAW && olen != clen))
            goto refuse;
        if (olen == 0) {
            if (check != 0)
                goto refuse;
            ended = 1;
            pos += LZ4_STREAM_HEADER;
            continue;
        }
        ended = 0;
        if (clen > size - pos - LZ4_STREAM_HEADER)
            goto refuse;
        total += olen;
        pos += LZ4_STREAM_HEADER + clen;
    }
    if (!ended || total > budget || total > PY_SSIZE_T_MAX)
        goto refuse;
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (result == NULL)
        goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
    int clean = 1;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t at = 0;
    pos = 0;
    while (pos < size) {
        int method = p[pos + 8] & 0xF0;
        int32_t clen = (int32_t)le32(p + pos + 9), olen = (int32_t)le32(p + pos + 13);
        uint32_t check = le32(p + pos + 17);
        const unsigned char *payload = p + pos + LZ4_STREAM_HEADER;
        pos += LZ4_STREAM_HEADER + clen;
        if (olen == 0)
            continue;
        if (method == LZ4_METHOD_RAW)
            memcpy(out + at, payload, (size_t)olen);
        else if (LZ4_decompress_safe((const char *)payload, (char *)out + at, clen, olen) != olen) {
            clean = 0;
            break;
        }
        if ((XXH32(out + at, (size_t)olen, LZ4_XXH32_SEED) & LZ4_CHECKSUM_MASK) != check) {
            clean = 0;
            break;
        }
        at += olen;
    }
    Py_END_ALLOW_THREADS
    if (clean)
        goto done;
    Py_CLEAR(result);
refuse:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&in);
    return result;
}

/* ------------------------------------------------------------------------------------------
 * RocksDB table blocks: the index walked, every data block checked and decompressed
 * ------------------------------------------------------------------------------------------ */

/* A varint of at most max_shift / 7 + 1 bytes. 1 = read, 0 = cut short or too long. */
static inline int
varint(const unsigned char **p, const unsigned char *end, int max_shift, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift <= max_shift; shift += 7) {
        if (*p >= end)
            return 0;
        unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

static inline int
varint32(const unsigned char **p, const unsigned char *end, uint32_t *out)
{
    uint64_t v;
    if (!varint(p, end, 28, &v) || v > UINT32_MAX)
        return 0;
    *out = (uint32_t)v;
    return 1;
}

static inline int
varint64(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
    return varint(p, end, 63, out);
}

typedef struct {
    uint64_t offset, size;
} Handle;

/* The (offset, size) of every data block from a decoded index block, as parsers/sst.py's
 * _data_handles reads it: from format_version 4, handles are whole at restart points and a
 * zigzag size delta between them. 1 = read, 0 = not clean, -2 = out of memory. */
static int
index_handles(const unsigned char *b, Py_ssize_t len, long version, Handle **out,
              Py_ssize_t *count_out)
{
    if (len < 4)
        return 0;
    uint32_t count = le32(b + len - 4) & 0x7fffffffu;
    if (count == 0 || (Py_ssize_t)count > (len - 4) / 4)
        return 0;
    const unsigned char *restarts = b + len - 4 - 4 * (Py_ssize_t)count;
    const unsigned char *p = b, *end = restarts;
    Py_ssize_t n = 0, cap = 0;
    Handle *hs = NULL;
    int64_t offset = -1, size = -1;
    uint32_t next_restart = 0;
    while (p < end) {
        uint32_t at = (uint32_t)(p - b), shared, non_shared;
        /* Restart offsets ascend: one pointer tells whether an entry starts at one. */
        while (next_restart < count && le32(restarts + 4 * next_restart) < at)
            next_restart++;
        int restart = next_restart < count && le32(restarts + 4 * next_restart) == at;
        if (!varint32(&p, end, &shared) || !varint32(&p, end, &non_shared))
            goto unclean;
        uint64_t o, s;
        if (version < 4) {
            uint32_t value_len;
            if (!varint32(&p, end, &value_len) || (size_t)(end - p) < (size_t)non_shared)
                goto unclean;
            p += non_shared;
            const unsigned char *v = p;
            if (!varint64(&v, end, &o) || !varint64(&v, end, &s) ||
                (size_t)(end - p) < (size_t)value_len)
                goto unclean;
            p += value_len;
            offset = (int64_t)o;
            size = (int64_t)s;
        }
        else {
            if ((size_t)(end - p) < (size_t)non_shared)
                goto unclean;
            p += non_shared;
            if (restart || offset < 0) {
                if (!varint64(&p, end, &o) || !varint64(&p, end, &s))
                    goto unclean;
                offset = (int64_t)o;
                size = (int64_t)s;
            }
            else {
                uint64_t delta;
                if (!varint64(&p, end, &delta))
                    goto unclean;
                offset += size + 5;
                size += (int64_t)(delta >> 1) ^ -(int64_t)(delta & 1);
            }
        }
        if (offset < 0 || size < 0)
            goto unclean;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            Handle *grown = PyMem_RawRealloc(hs, (size_t)cap * sizeof(Handle));
            if (grown == NULL) {
                PyMem_RawFree(hs);
                return -2;
            }
            hs = grown;
        }
        hs[n++] = (Handle){(uint64_t)offset, (uint64_t)size};
    }
    *out = hs;
    *count_out = n;
    return 1;
unclean:
    PyMem_RawFree(hs);
    return 0;
}

static uint32_t crc32c_table[256];

static void
crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[i] = c;
    }
}

static uint32_t
crc32c_update(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    while (n--)
        crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* RocksDB's checksum of a block and its compression type byte (parsers/sst.py's _checksum):
 * kCRC32c masked, kxxHash, kxxHash64 cut to 32 bits, kXXH3 with the type byte mixed in. */
static uint32_t
block_checksum(int kind, const unsigned char *block, size_t size, unsigned char type)
{
    switch (kind) {
    case 1: {
        uint32_t crc = crc32c_update(crc32c_update(0, block, size), &type, 1);
        return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
    }
    case 2: {
        XXH32_state_t st;
        XXH32_reset(&st, 0);
        XXH32_update(&st, block, size);
        XXH32_update(&st, &type, 1);
        return XXH32_digest(&st);
    }
    case 3: {
        XXH64_state_t st;
        XXH64_reset(&st, 0);
        XXH64_update(&st, block, size);
        XXH64_update(&st, &type, 1);
        return (uint32_t)XXH64_digest(&st);
    }
    default:
        return (uint32_t)XXH3_64bits(block, size) ^ (uint32_t)(type * 0x6B9083D9u);
    }
}

#define SST_FOOTER 53
#define SST_TRAILER 5
#define SST_NO_COMPRESSION 0
#define SST_LZ4 4
#define SST_LZ4HC 5

/* sst_data_blocks(table, index_block, format_version, checksum_type, budget): every data block
 * of a RocksDB table, checksum checked and decompressed (none or LZ4) as RocksDB reads them,
 * in file order, with the bytes they declare; no Python call a block and no GIL while
 * checking and decompressing. None where this is not the whole story (another codec, a
 * checksum type past kXXH3, a handle out of the table, a checksum mismatch, damaged LZ4,
 * more than `budget` bytes declared): parsers/sst.py then reads the table and names what is
 * wrong. */
static PyObject *
sst_data_blocks(PyObject *self, PyObject *args)
{
    Py_buffer table, index;
    long version, kind;
    long long budget;
    if (!PyArg_ParseTuple(args, "y*y*llL:sst_data_blocks", &table, &index, &version, &kind,
                          &budget))
        return NULL;
    PyObject *result = NULL, *blocks = NULL;
    Handle *hs = NULL;
    Py_ssize_t n = 0;
    long long declared = 0;
    const unsigned char *data = table.buf;
    if (kind < 0 || kind > 4 || table.len < SST_FOOTER) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int rc = index_handles(index.buf, index.len, version, &hs, &n);
    if (rc == -2) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    blocks = PyList_New(n);
    if (blocks == NULL)
        goto done;
    uint64_t limit = (uint64_t)(table.len - SST_FOOTER);
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t offset = hs[i].offset, size = hs[i].size;
        if (offset > limit || size > limit - offset || SST_TRAILER > limit - offset - size) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        unsigned char type = data[offset + size];
        uint64_t want = size;
        if (type == SST_LZ4 || type == SST_LZ4HC) {
            const unsigned char *p = data + offset;
            uint32_t length;
            if (!varint32(&p, data + offset + size, &length)) {
                result = Py_NewRef(Py_None);
                goto done;
            }
            want = length;
        }
        else if (type != SST_NO_COMPRESSION) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        declared += (long long)want;
        if (declared > budget || want > (uint64_t)INT_MAX) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)want);
        if (out == NULL)
            goto done;
        PyList_SET_ITEM(blocks, i, out);
    }
    int clean = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && clean; i++) {
        const unsigned char *raw = data + hs[i].offset;
        size_t size = (size_t)hs[i].size;
        unsigned char type = raw[size];
        if (kind != 0 && block_checksum((int)kind, raw, size, type) != le32(raw + size + 1)) {
            clean = 0;
            break;
        }
        char *dst = PyBytes_AS_STRING(PyList_GET_ITEM(blocks, i));
        int length = (int)PyBytes_GET_SIZE(PyList_GET_ITEM(blocks, i));
        if (type == SST_NO_COMPRESSION) {
            memcpy(dst, raw, size);
            continue;
        }
        const unsigned char *p = raw;
        uint32_t declared_length;
        varint32(&p, raw + size, &declared_length);
        int header = (int)(p - raw);
        int got = LZ4_decompress_safe((const char *)p, dst, (int)size - header, length);
        clean = got == length;
    }
    Py_END_ALLOW_THREADS
    result = clean ? Py_BuildValue("(OL)", blocks, declared) : Py_NewRef(Py_None);
done:
    Py_XDECREF(blocks);
    PyMem_RawFree(hs);
    PyBuffer_Release(&table);
    PyBuffer_Release(&index);
    return result;
}

/* block_entries(block): parsers/sst.py's _entries of a whole block, (key, value start, value
 * end) of every entry, each key made whole from the prefix it shares with the one before. A
 * table's properties are some forty entries: walking them in Python was 7% of the CPU of a
 * 1M-key query on RocksDB. None where Python must name what is wrong: a restart array that
 * does not fit, a varint past the entries or longer than RocksDB's varint32, a shared prefix
 * longer than the key before, an entry past the entries' end. */
static PyObject *
block_entries(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *b = view.buf;
    Py_ssize_t len = view.len;
    PyObject *entries = NULL, *result = NULL;
    unsigned char *key = NULL;
    size_t klen = 0, cap = 0;
    if (len < 4)
        goto refuse;
    uint32_t count = le32(b + len - 4) & 0x7fffffffu;
    if (count == 0 || (Py_ssize_t)count > (len - 4) / 4)
        goto refuse;
    const unsigned char *p = b, *end = b + len - 4 - 4 * (Py_ssize_t)count;
    entries = PyList_New(0);
    if (entries == NULL)
        goto done;
    while (p < end) {
        uint32_t shared, non_shared, value_len;
        if (!varint32(&p, end, &shared) || !varint32(&p, end, &non_shared) ||
            !varint32(&p, end, &value_len))
            goto refuse;
        if (shared > klen || (uint64_t)(end - p) < (uint64_t)non_shared + value_len)
            goto refuse;
        size_t need = (size_t)shared + non_shared;
        if (need > cap) {
            size_t grown_cap = need > 2 * cap ? need : 2 * cap;
            unsigned char *grown = PyMem_RawRealloc(key, grown_cap ? grown_cap : 1);
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            key = grown;
            cap = grown_cap;
        }
        memcpy(key + shared, p, non_shared);
        klen = need;
        p += non_shared;
        Py_ssize_t start = p - b;
        /* y# makes None of a NULL pointer: an empty first key has no buffer yet. */
        const char *whole = key ? (const char *)key : "";
        PyObject *entry =
            Py_BuildValue("(y#nn)", whole, (Py_ssize_t)klen, start, start + (Py_ssize_t)value_len);
        if (entry == NULL || PyList_Append(entries, entry) < 0) {
            Py_XDECREF(entry);
            goto done;
        }
        Py_DECREF(entry);
        p += value_len;
    }
    result = Py_NewRef(entries);
    goto done;
refuse:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(entries);
    PyMem_RawFree(key);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------------------------------
 * Sorted runs: RocksDB's tables (SSTs) merged by key as RocksDB reads them
 * ------------------------------------------------------------------------------------------ */

/* One table's data blocks (decoded, in file order), walked an entry at a time. An entry is
 * shared, non_shared, value_length (varint32 each), the key's unshared bytes and the value;
 * keys are internal keys: the user key, then sequence << 8 | type (uint64, little-endian).
 * Restart offsets (uint32) and their count end a block. The current key is kept whole; the
 * next one only writes its unshared bytes over it. */
typedef struct {
    const Py_buffer *blocks;
    Py_ssize_t nblocks, next;
    const unsigned char *p, *end;
    unsigned char *key;
    size_t klen, cap, shareable;
    const unsigned char *val;
    uint32_t vlen;
    uint64_t tag;
    /* The key (numbered as the merge takes keys, from 1) and sequence number of the entry
     * taken from this run last. */
    Py_ssize_t taken_key;
    uint64_t taken_seq;
} Run;

/* Two user keys in the bytewise comparator's order, eight bytes a step read as big-endian
 * words: state keys are a few tens of bytes, on which memcmp's call costs as much as the
 * comparing, and a merge compares each entry's key several times. */
static inline int
user_cmp(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    for (; n >= 8; a += 8, b += 8, n -= 8) {
        uint64_t x = be64(a), y = be64(b);
        if (x != y)
            return x < y ? -1 : 1;
    }
    for (; n > 0; a++, b++, n--)
        if (*a != *b)
            return *a < *b ? -1 : 1;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

/* RocksDB's order of internal keys (bytewise comparator): user keys ascending, then the
 * newer entry (higher sequence number) first. */
static inline int
internal_cmp(const unsigned char *a, size_t alen, uint64_t atag, const unsigned char *b,
             size_t blen, uint64_t btag)
{
    int c = user_cmp(a, alen, b, blen);
    if (c != 0)
        return c;
    return atag > btag ? -1 : atag < btag ? 1 : 0;
}

/* Step to the run's next entry. 1 = an entry, 0 = the run's end, -1 = not clean (a damaged
 * block), -2 = out of memory. Runs without the GIL. The order of entries is checked by the
 * merge, across runs. */
static int
run_next(Run *r)
{
    while (r->p >= r->end) {
        if (r->next >= r->nblocks)
            return 0;
        const Py_buffer *b = &r->blocks[r->next++];
        const unsigned char *base = b->buf;
        if (b->len < 4)
            return -1;
        uint32_t count = le32(base + b->len - 4);
        /* The top bit marks a data block hash index, whose bytes sit between the restarts
         * and the count: a layout the Python reader does not take either. */
        if (count == 0 || (count & 0x80000000u) || (Py_ssize_t)count > (b->len - 4) / 4)
            return -1;
        r->p = base;
        r->end = base + b->len - 4 - 4 * (Py_ssize_t)count;
        r->shareable = 0; /* a block starts at a restart point */
    }
    uint32_t shared, non_shared, vlen;
    if (r->end - r->p >= 3 && ((r->p[0] | r->p[1] | r->p[2]) & 0x80) == 0) {
        /* All three lengths below 128, a byte each (RocksDB's own fast path). */
        shared = r->p[0], non_shared = r->p[1], vlen = r->p[2];
        r->p += 3;
    }
    else if (!varint32(&r->p, r->end, &shared) || !varint32(&r->p, r->end, &non_shared) ||
             !varint32(&r->p, r->end, &vlen))
        return -1;
    if (shared > r->shareable || (size_t)(r->end - r->p) < (size_t)non_shared + vlen)
        return -1;
    size_t klen = (size_t)shared + non_shared;
    if (klen < 8)
        return -1;
    if (klen > r->cap) {
        size_t cap = klen * 2;
        unsigned char *grown = PyMem_RawRealloc(r->key, cap);
        if (grown == NULL)
            return -2;
        r->key = grown;
        r->cap = cap;
    }
    memcpy(r->key + shared, r->p, non_shared);
    r->klen = klen;
    r->shareable = klen;
    r->tag = le64(r->key + klen - 8);
    r->val = r->p + non_shared;
    r->vlen = vlen;
    r->p += (size_t)non_shared + vlen;
    return 1;
}

/* Take the run's head as an entry of key number `key` and step on, as run_next does;
 * -1 too where the run holds an older entry of that key before a newer one (the merge
 * across runs cannot see it when a third run's entry shadows both). */
static inline int
run_take(Run *r, Py_ssize_t key)
{
    uint64_t seq = r->tag >> 8;
    if (r->taken_key == key && seq >= r->taken_seq)
        return -1;
    r->taken_key = key;
    r->taken_seq = seq;
    return run_next(r);
}

static inline int
run_before(const Run *a, const Run *b)
{
    return internal_cmp(a->key, a->klen - 8, a->tag, b->key, b->klen - 8, b->tag) < 0;
}

static void
heap_down(Run **heap, Py_ssize_t n, Py_ssize_t i)
{
    for (;;) {
        Py_ssize_t least = i, l = 2 * i + 1, r = l + 1;
        if (l < n && run_before(heap[l], heap[least]))
            least = l;
        if (r < n && run_before(heap[r], heap[least]))
            least = r;
        if (least == i)
            return;
        Run *t = heap[i];
        heap[i] = heap[least];
        heap[least] = t;
        i = least;
    }
}

/* Arrow large_binary buffers grown as rows come: int64 offsets and the bytes. */
typedef struct {
    int64_t *at;
    unsigned char *data;
    size_t rows, at_cap, len, cap;
} Column;

static int
column_put(Column *c, const unsigned char *bytes, size_t size)
{
    if (c->rows + 2 > c->at_cap) {
        size_t cap = c->at_cap ? c->at_cap * 2 : 1 << 12;
        int64_t *at = PyMem_RawRealloc(c->at, cap * sizeof(int64_t));
        if (at == NULL)
            return -2;
        if (c->at == NULL)
            at[0] = 0;
        c->at = at;
        c->at_cap = cap;
    }
    if (c->len + size > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1 << 16;
        while (cap < c->len + size)
            cap *= 2;
        unsigned char *data = PyMem_RawRealloc(c->data, cap);
        if (data == NULL)
            return -2;
        c->data = data;
        c->cap = cap;
    }
    if (size)
        memcpy(c->data + c->len, bytes, size);
    c->len += size;
    c->at[++c->rows] = (int64_t)c->len;
    return 0;
}

/* Room for `rows` rows of `bytes` in all before the column first grows: a merge knows
 * roughly what it will write (its tables' bytes), and growing a column of megabytes step by
 * step copies it each time. 0 = done, -2 = out of memory. */
static int
column_reserve(Column *c, size_t rows, size_t bytes)
{
    int64_t *at = PyMem_RawMalloc((rows + 2) * sizeof(int64_t));
    unsigned char *data = PyMem_RawMalloc(bytes ? bytes : 1);
    if (at == NULL || data == NULL) {
        PyMem_RawFree(at);
        PyMem_RawFree(data);
        return -2;
    }
    at[0] = 0;
    c->at = at;
    c->at_cap = rows + 2;
    c->data = data;
    c->cap = bytes ? bytes : 1;
    return 0;
}

static void
column_free(Column *c)
{
    PyMem_RawFree(c->at);
    PyMem_RawFree(c->data);
}

#define TYPE_DELETION 0x0
#define TYPE_VALUE 0x1
#define TYPE_SINGLE_DELETION 0x7

/* The user key a merge emitted last (a copy: its run's key buffer moves on). */
typedef struct {
    unsigned char *bytes;
    size_t len, cap;
    uint64_t seq;
} LastKey;

static int
last_key_set(LastKey *last, const Run *r)
{
    size_t ulen = r->klen - 8;
    if (ulen > last->cap) {
        unsigned char *grown = PyMem_RawRealloc(last->bytes, ulen * 2);
        if (grown == NULL)
            return -2;
        last->bytes = grown;
        last->cap = ulen * 2;
    }
    if (ulen)
        memcpy(last->bytes, r->key, ulen);
    last->len = ulen;
    last->seq = r->tag >> 8;
    return 1;
}

/* The newest entry of a user key, the one that decides it: a value is a row (its key and
 * value into `keys` and `values`, or the value's fields into `fields`; NULL: not wanted;
 * past a leading version byte 0 on both sides when `strip`), a deletion none. 1 = taken,
 * 0 = not clean (an entry that is neither, such as a merge operand; a pair not starting
 * with byte 0 under `strip`; a value row too short for `fields`), -2 = out of memory. */
static inline int
merge_take(const Run *top, int strip, Column *keys, Column *values, Fields *fields,
           Py_ssize_t *rows)
{
    unsigned char type = (unsigned char)(top->tag & 0xff);
    if (type == TYPE_DELETION || type == TYPE_SINGLE_DELETION)
        return 1;
    if (type != TYPE_VALUE)
        return 0;
    const unsigned char *key = top->key, *val = top->val;
    size_t klen = top->klen - 8, vlen = top->vlen;
    if (strip) {
        if (klen == 0 || vlen == 0 || key[0] != 0 || val[0] != 0)
            return 0;
        key++, klen--, val++, vlen--;
    }
    if ((keys != NULL && column_put(keys, key, klen) < 0) ||
        (values != NULL && column_put(values, val, vlen) < 0))
        return -2;
    if (fields != NULL) {
        int rc = fields_put(fields, val, vlen);
        if (rc != 1)
            return rc;
    }
    (*rows)++;
    return 1;
}

/* The merge of many runs: a heap of them by internal key. A run out of order somewhere puts
 * a key on top of the heap after a greater one, or (run_take) an older entry of a key
 * before a newer: both are refused. */
static int
runs_merge_heap(Run *runs, Py_ssize_t k, int strip, Column *keys, Column *values,
                Fields *fields, Py_ssize_t *rows)
{
    Run **heap = PyMem_RawMalloc((size_t)(k ? k : 1) * sizeof(Run *));
    LastKey last = {0};
    int rc = 1;
    Py_ssize_t emitted = 0;
    if (heap == NULL)
        return -2;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        int got = run_next(&runs[i]);
        if (got < 0) {
            rc = got == -1 ? 0 : -2;
            goto done;
        }
        if (got)
            heap[n++] = &runs[i];
    }
    for (Py_ssize_t i = n / 2 - 1; i >= 0; i--)
        heap_down(heap, n, i);
    while (n > 0) {
        Run *top = heap[0];
        if (emitted && user_cmp(last.bytes, last.len, top->key, top->klen - 8) >= 0) {
            rc = 0; /* a key after a greater one: a run is out of order */
            goto done;
        }
        emitted++;
        if ((rc = merge_take(top, strip, keys, values, fields, rows)) != 1 ||
            (rc = last_key_set(&last, top)) != 1)
            goto done;
        /* Every older entry of this key, in any run, is shadowed: step past them all. */
        int first = 1;
        while (n > 0) {
            Run *r = heap[0];
            if (!first) {
                if (user_cmp(r->key, r->klen - 8, last.bytes, last.len) != 0)
                    break;
                if ((r->tag >> 8) >= last.seq) {
                    rc = 0; /* a tie, or an older entry of the key before this newer one */
                    goto done;
                }
            }
            first = 0;
            int got = run_take(r, emitted);
            if (got < 0) {
                rc = got == -1 ? 0 : -2;
                goto done;
            }
            if (!got)
                heap[0] = heap[--n];
            heap_down(heap, n, 0);
        }
    }
done:
    PyMem_RawFree(heap);
    PyMem_RawFree(last.bytes);
    return rc;
}

/* The merge of a few runs (a version's tables are mostly a handful of L0 files, often
 * holding many of the same keys): each step scans the runs' heads for the least user key,
 * which runs hold it and its newest entry, then moves every one of them on. On four tables
 * of 40,000 keys that is 12 ns an entry where the heap takes 20 when every key is in each,
 * and 21 against 25 when each key is in one. Out of order is refused as the heap does it:
 * a key after a greater one, an older entry of a key before a newer (run_take). */
#define FEW_RUNS 8

static int
runs_merge_few(Run *runs, Py_ssize_t k, int strip, Column *keys, Column *values,
               Fields *fields, Py_ssize_t *rows)
{
    Run *live[FEW_RUNS];
    LastKey last = {0};
    int rc = 1;
    Py_ssize_t emitted = 0;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        int got = run_next(&runs[i]);
        if (got < 0)
            return got == -1 ? 0 : -2;
        if (got)
            live[n++] = &runs[i];
    }
    while (n > 0) {
        Run *best = live[0];
        unsigned holders = 1;
        for (Py_ssize_t i = 1; i < n; i++) {
            Run *r = live[i];
            int c = user_cmp(r->key, r->klen - 8, best->key, best->klen - 8);
            if (c < 0) {
                best = r;
                holders = 1u << i;
            }
            else if (c == 0) {
                holders |= 1u << i;
                if (r->tag > best->tag)
                    best = r;
            }
        }
        uint64_t seq;
        int c = emitted ? user_cmp(best->key, best->klen - 8, last.bytes, last.len) : 1;
        if (c < 0) {
            rc = 0; /* a key after a greater one: a run is out of order */
            goto done;
        }
        if (c == 0) {
            /* Older entries of the key taken last: shadowed, unless one is not older. */
            seq = last.seq;
            best = NULL;
        }
        else {
            emitted++;
            if ((rc = merge_take(best, strip, keys, values, fields, rows)) != 1 ||
                (rc = last_key_set(&last, best)) != 1)
                goto done;
            seq = last.seq;
        }
        /* Downwards: a finished run's place takes the last one, already moved on. */
        for (Py_ssize_t i = n - 1; i >= 0; i--) {
            if (!(holders & (1u << i)))
                continue;
            Run *r = live[i];
            if (r != best && (r->tag >> 8) >= seq) {
                rc = 0; /* a tie, or an older entry of the key before this newer one */
                goto done;
            }
            int got = run_take(r, emitted);
            if (got < 0) {
                rc = got == -1 ? 0 : -2;
                goto done;
            }
            if (!got)
                live[i] = live[--n];
        }
    }
done:
    PyMem_RawFree(last.bytes);
    return rc;
}

/* Merge the runs as a read of the newest state does: per user key, the entry with the
 * highest sequence number decides (:c:func:`merge_take`). 1 = merged, 0 = not clean (what
 * merge_take refuses; an older entry of a key before a newer one, or two with one sequence
 * number; user keys out of order; a damaged run), -2 = out of memory. Runs without the
 * GIL. */
static int
runs_merge(Run *runs, Py_ssize_t k, int strip, Column *keys, Column *values, Fields *fields,
           Py_ssize_t *rows)
{
    if (k <= FEW_RUNS)
        return runs_merge_few(runs, k, strip, keys, values, fields, rows);
    return runs_merge_heap(runs, k, strip, keys, values, fields, rows);
}

/* A column's buffers as (offsets, data), handed over as they are (the column keeps
 * neither); an unwanted column (NULL) is None. */
static PyObject *
column_buffers(Column *c, Py_ssize_t rows)
{
    if (c == NULL)
        return Py_NewRef(Py_None);
    if (c->at == NULL && column_reserve(c, 0, 0) < 0)
        return PyErr_NoMemory();
    PyObject *offsets = owned_bytes(c->at, (rows + 1) * (Py_ssize_t)sizeof(int64_t));
    if (offsets == NULL)
        return NULL;
    c->at = NULL;
    PyObject *data = owned_bytes(c->data, (Py_ssize_t)c->len);
    if (data == NULL) {
        Py_DECREF(offsets);
        return NULL;
    }
    c->data = NULL;
    return Py_BuildValue("(NN)", offsets, data);
}

/* runs_columns(runs, keys, values, strip_version[, value_sizes]): RocksDB's tables, each a
 * list of its decoded data blocks, merged as a read of the newest state does; the live
 * rows' keys and values as Arrow columns in key order, without a Python object a row and
 * without the GIL. With value_sizes (the value rows' fields all fixed-width, their sizes as
 * flat_struct takes them) the values come as flat_struct gives their fields, decoded as
 * they are taken. None where the merge is not clean (see runs_merge): RocksDB itself then
 * reads them (or, a value row too short for its fields, the rows' own decoder). */
static PyObject *
runs_columns(PyObject *self, PyObject *args)
{
    PyObject *runs_arg, *sizes_arg = Py_None;
    int want_keys, want_values, strip;
    if (!PyArg_ParseTuple(args, "Oppp|O:runs_columns", &runs_arg, &want_keys, &want_values,
                          &strip, &sizes_arg))
        return NULL;
    Fields fields = {0};
    int by_field = want_values && sizes_arg != Py_None;
    if (by_field && fields_setup(&fields, sizes_arg, "runs_columns") < 0)
        return NULL;
    PyObject *outer = PySequence_Fast(runs_arg, "runs_columns: runs must be a sequence");
    if (outer == NULL)
        return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(outer), held = 0, total = 0;
    size_t bytes = 0;
    PyObject **inner = PyMem_Calloc((size_t)(k ? k : 1), sizeof(PyObject *));
    Run *runs = PyMem_Calloc((size_t)(k ? k : 1), sizeof(Run));
    Py_buffer *views = NULL;
    PyObject *result = NULL;
    Column keys = {0}, values = {0};
    if (inner == NULL || runs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        inner[i] = PySequence_Fast(PySequence_Fast_GET_ITEM(outer, i),
                                   "runs_columns: a run must be a sequence of blocks");
        if (inner[i] == NULL)
            goto done;
        total += PySequence_Fast_GET_SIZE(inner[i]);
    }
    views = PyMem_Calloc((size_t)(total ? total : 1), sizeof(Py_buffer));
    if (views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        Py_ssize_t nb = PySequence_Fast_GET_SIZE(inner[i]);
        runs[i].blocks = views + held;
        runs[i].nblocks = nb;
        for (Py_ssize_t j = 0; j < nb; j++) {
            if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(inner[i], j), &views[held],
                                   PyBUF_SIMPLE) < 0)
                goto done;
            bytes += (size_t)views[held].len;
            held++;
        }
    }
    /* A value is stored whole in its block, so the blocks' bytes bound the values; keys
     * (prefix-compressed there) start from the same room. An entry is some 16 bytes or
     * more: that bounds the rows, but for a few of the smallest (the offsets then grow). */
    /* A value row of fields is at least `width` bytes, stored whole: that bounds the rows. */
    if ((want_keys && column_reserve(&keys, bytes / 16, bytes) < 0) ||
        (want_values && !by_field && column_reserve(&values, bytes / 16, bytes) < 0) ||
        (by_field && fields_grow(&fields, (Py_ssize_t)bytes / fields.width + 1) < 0)) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t rows = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = runs_merge(runs, k, strip, want_keys ? &keys : NULL,
                    want_values && !by_field ? &values : NULL, by_field ? &fields : NULL, &rows);
    Py_END_ALLOW_THREADS
    if (rc == -2) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *kb = column_buffers(want_keys ? &keys : NULL, rows);
    PyObject *vb = kb == NULL ? NULL
                   : by_field ? fields_buffers(&fields)
                              : column_buffers(want_values ? &values : NULL, rows);
    if (vb != NULL)
        result = Py_BuildValue("(nNN)", rows, kb, vb);
    else
        Py_XDECREF(kb);
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    for (Py_ssize_t i = 0; runs != NULL && i < k; i++)
        PyMem_RawFree(runs[i].key);
    for (Py_ssize_t i = 0; inner != NULL && i < k; i++)
        Py_XDECREF(inner[i]);
    PyMem_Free(views);
    PyMem_Free(runs);
    PyMem_Free(inner);
    column_free(&keys);
    column_free(&values);
    fields_free(&fields);
    Py_DECREF(outer);
    return result;
}

/* Reading a store allocates and frees buffers of megabytes for every partition (decompressed
 * files, rendered text). glibc hands those back to the kernel and takes fresh zeroed pages the
 * next time: a page fault each 4 KiB, more system time than the rendering itself. Kept, they
 * are reused. True when the allocator took the settings. */
static PyObject *
keep_freed_memory(PyObject *self, PyObject *noargs)
{
#if defined(__GLIBC__)
    int ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) && mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return PyBool_FromLong(ok);
#else
    Py_RETURN_FALSE;
#endif
}

/* One side of a list of (key, value) pairs as Arrow's large_binary layout: the int64 offsets
 * (n + 1 of them, native order) and the bytes back to back. pyarrow builds the same array from
 * a list of bytes objects an element at a time, about 1 s per million rows; this is one copy.
 * None if an item is not a 2-tuple holding bytes at ``index``. */
static PyObject *
binary_column(PyObject *self, PyObject *args)
{
    PyObject *items;
    int index, strip_version = 0;
    if (!PyArg_ParseTuple(args, "O!i|p", &PyList_Type, &items, &index, &strip_version))
        return NULL;
    if (index != 0 && index != 1) {
        PyErr_SetString(PyExc_ValueError, "index must be 0 or 1");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(items);
    Py_ssize_t total = 0, skip = strip_version ? 1 : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2)
            Py_RETURN_NONE;
        if (strip_version) {
            /* Both sides start with encoding version 0, or Python judges the pair. */
            for (int j = 0; j < 2; j++) {
                PyObject *b = PyTuple_GET_ITEM(item, j);
                if (!PyBytes_CheckExact(b) || PyBytes_GET_SIZE(b) == 0 ||
                    PyBytes_AS_STRING(b)[0] != 0)
                    Py_RETURN_NONE;
            }
        }
        PyObject *side = PyTuple_GET_ITEM(item, index);
        if (!PyBytes_CheckExact(side))
            Py_RETURN_NONE;
        total += PyBytes_GET_SIZE(side) - skip;
    }
    PyObject *offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int64_t));
    if (offsets == NULL)
        return NULL;
    PyObject *data = PyBytes_FromStringAndSize(NULL, total);
    if (data == NULL) {
        Py_DECREF(offsets);
        return NULL;
    }
    int64_t *at = (int64_t *)PyBytes_AS_STRING(offsets);
    char *out = PyBytes_AS_STRING(data);
    int64_t pos = 0;
    at[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *side = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), index);
        Py_ssize_t size = PyBytes_GET_SIZE(side) - skip;
        memcpy(out + pos, PyBytes_AS_STRING(side) + skip, (size_t)size);
        pos += size;
        at[i + 1] = pos;
    }
    return Py_BuildValue("(NN)", offsets, data);
}

/* Spark's Murmur3_x86_32.hashUnsafeBytes (the spec: java_bytes.murmur3_hash_bytes): whole
 * little-endian words, then each trailing byte mixed as a sign-extended int. */
static uint32_t
murmur3_mix32(uint32_t h1, uint32_t k1)
{
    k1 *= 0xCC9E2D51u;
    k1 = (k1 << 15) | (k1 >> 17);
    k1 *= 0x1B873593u;
    h1 ^= k1;
    h1 = (h1 << 13) | (h1 >> 19);
    return h1 * 5 + 0xE6546B64u;
}

static PyObject *
murmur3_bytes(PyObject *self, PyObject *args)
{
    Py_buffer view;
    long long seed;
    if (!PyArg_ParseTuple(args, "y*L", &view, &seed))
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, aligned = n - n % 4;
    uint32_t h1 = (uint32_t)seed;
    for (Py_ssize_t i = 0; i < aligned; i += 4) {
        uint32_t word = (uint32_t)p[i] | ((uint32_t)p[i + 1] << 8) | ((uint32_t)p[i + 2] << 16) |
                        ((uint32_t)p[i + 3] << 24);
        h1 = murmur3_mix32(h1, word);
    }
    for (Py_ssize_t i = aligned; i < n; i++)
        h1 = murmur3_mix32(h1, (uint32_t)(int32_t)(signed char)p[i]);
    PyBuffer_Release(&view);
    h1 ^= (uint32_t)n;
    h1 ^= h1 >> 16;
    h1 *= 0x85EBCA6Bu;
    h1 ^= h1 >> 13;
    h1 *= 0xC2B2AE35u;
    h1 ^= h1 >> 16;
    return PyLong_FromLong((long)(int32_t)h1);
}

static PyMethodDef methods[] = {
    {"murmur3_bytes", murmur3_bytes, METH_VARARGS,
     "murmur3_bytes(buf, seed) -> Spark's Murmur3_x86_32.hashUnsafeBytes as a signed int."},
    {"read_records", read_records, METH_VARARGS,
     "read_records(buf, allow_deletes[, whole_values]) -> list of (key, value or None), or "
     "None if the stream is not clean; values are cut to a multiple of 8 unless whole_values."},
    {"read_record_keys", read_record_keys, METH_VARARGS,
     "read_record_keys(buf, allow_deletes) -> (put keys, removed keys), or None if the "
     "stream is not clean."},
    {"compile_plan", compile_plan, METH_VARARGS,
     "compile_plan(key_plan, value_plan) -> an opaque plan for render_lines."},
    {"render_lines", render_lines, METH_VARARGS,
     "render_lines(plan, pairs, partition_id, skip=False) -> (bytes, pending pair or None, "
     "rows); with skip, key and value start with a version byte 0 that is skipped."},
    {"binary_column", binary_column, METH_VARARGS,
     "binary_column(pairs, index, strip_version=False) -> (int64 offsets, data) of each "
     "pair's item ``index`` as Arrow's large_binary buffers, or None if an item is not a pair "
     "of bytes; with strip_version, both items of every pair start with a byte 0, left out."},
    {"keep_freed_memory", keep_freed_memory, METH_NOARGS,
     "keep_freed_memory() -> whether glibc now keeps freed blocks up to 32 MiB for reuse."},
    {"render_chain", render_chain, METH_VARARGS,
     "render_chain(plan, snapshot or None, deltas, partition_id) -> (parts, rows), or None "
     "if a stream is not clean; parts are bytes and (key, value) pairs left for Python."},
    {"chain_columns", chain_columns, METH_VARARGS,
     "chain_columns(snapshot or None, deltas, keys, values[, value_sizes]) -> (rows, key "
     "buffers or None, value buffers or None), each (int64 offsets, data), the values as "
     "flat_struct's fields with value_sizes; or None if a stream is not clean."},
    {"flat_struct", flat_struct, METH_VARARGS,
     "flat_struct(offsets, data, first, rows, sizes) -> per field (values, validity or None, "
     "null count, int32 offsets or None) of UnsafeRows of fixed-width (size 1, 2, 4 or 8) and "
     "string or binary (size 0) fields, or None if a row is not clean."},
    {"gather_bytes", gather_bytes, METH_VARARGS,
     "gather_bytes(data, starts, sizes) -> (int64 offsets, bytes) of every row's span of data, "
     "or None if a span is outside it."},
    {"lz4_stream", lz4_stream, METH_VARARGS,
     "lz4_stream(data, budget) -> every LZ4Block stream in data decoded and checked, or None "
     "where parsers/compression/lz4.py must read it."},
    {"sst_data_blocks", sst_data_blocks, METH_VARARGS,
     "sst_data_blocks(table, index_block, format_version, checksum_type, budget) -> (blocks, "
     "bytes declared): a RocksDB table's data blocks checked and decompressed, or None "
     "where parsers/sst.py must read it."},
    {"block_entries", block_entries, METH_O,
     "block_entries(block) -> [(key, value start, value end)] of every entry of a RocksDB "
     "block, or None where parsers/sst.py must read it."},
    {"runs_columns", runs_columns, METH_VARARGS,
     "runs_columns(runs, keys, values, strip_version[, value_sizes]) -> (rows, key buffers "
     "or None, value buffers or None), each (int64 offsets, data), from RocksDB tables' "
     "decoded data blocks merged by key, the values as flat_struct's fields with "
     "value_sizes; or None if the merge is not clean."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_speedups",
    "Compiled hot loops of StateGlass; the pure-Python code is the fallback and the spec.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    const char *pure = getenv("STATEGLASS_PURE");
    if (pure != NULL && pure[0] != '\0' && strcmp(pure, "0") != 0) {
        PyErr_SetString(PyExc_ImportError, "STATEGLASS_PURE is set: using pure Python");
        return NULL;
    }
    crc32c_init();
    if (PyType_Ready(&OwnedBytesType) < 0)
        return NULL;
    return PyModule_Create(&module);
}
