/* Optional compiled loops for the two hot paths of StateGlass (plain CPython C API).
 *
 *   read_records(buf, allow_deletes[, whole_values]) -> list[(key, value|None)] | None
 *   read_record_keys(buf, allow_deletes) -> (puts, removed) | None
 *   compile_plan(key_plan, value_plan) -> capsule
 *   render_lines(plan, pairs, partition_id[, skip]) -> (bytes, pending pair | None, rows)
 *   render_chain(plan, snapshot | None, deltas, partition_id) -> (parts, rows) | None
 *   binary_column(pairs, index[, strip_version]) -> (offsets, data) | None
 *   chain_columns(snapshot | None, deltas, keys, values) -> (rows, columns...) | None
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
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

/* Record the newest value of key (vlen -1: removed). 0 = done, -1 = out of memory (no Python
 * error set: a merge runs without the GIL). */
static int
table_set(Table *t, const unsigned char *key, int32_t klen, const unsigned char *val,
          int32_t vlen)
{
    if (t->slots == NULL || (size_t)(t->n + 1) * 2 > t->mask + 1) {
        if (t->n >= 0x7fffffff || table_grow(t, 0) < 0)
            return -1;
    }
    uint64_t h = hash_bytes(key, klen);
    size_t j = (size_t)h & t->mask;
    uint64_t slot;
    while ((slot = t->slots[j]) != 0) {
        if (SLOT_TAG(slot) == SLOT_TAG(h)) {
            Entry *e = &t->entries[(slot & 0xFFFFFFFFULL) - 1];
            if (e->hash == h && e->klen == klen && memcmp(e->key, key, (size_t)klen) == 0) {
                e->val = val;
                e->vlen = vlen;
                return 0;
            }
        }
        j = (j + 1) & t->mask;
    }
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 1 << 12;
        Entry *entries = PyMem_RawRealloc(t->entries, (size_t)cap * sizeof(Entry));
        if (entries == NULL)
            return -1;
        t->entries = entries;
        t->cap = cap;
    }
    t->entries[t->n] = (Entry){key, val, h, klen, vlen};
    t->slots[j] = SLOT_TAG(h) | (uint64_t)(++t->n);
    return 0;
}

static int
table_visit(void *ctx, const unsigned char *k, int32_t klen, const unsigned char *v,
            int32_t vlen)
{
    return table_set(ctx, k, klen, v, vlen);
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
    for (Py_ssize_t i = 0; i < nviews; i++) {
        if (!held[i])
            continue;
        if (t->slots == NULL) {
            /* Sized for the first file's records (at least 16 bytes each, usually ~50):
             * growing a big table step by step re-hashes it each time. */
            if (table_grow(t, (size_t)(views[i].len / 24) + 16) < 0)
                return -1;
        }
        /* A snapshot holds no removals; a delta may. */
        int rc = walk_stream(views[i].buf, views[i].len, i > 0, 0, table_visit, t);
        if (rc <= 0)
            return rc;
    }
    return 1;
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

/* chain_columns(snapshot, deltas, keys, values): an HDFS chain merged as a dict updated file
 * by file would be (first appearance order, last record winning, removed keys gone), its
 * live rows' keys and values as Arrow columns, without a Python object a row. The merge runs
 * without the GIL, so partitions decode in parallel threads. */
static PyObject *
chain_columns(PyObject *self, PyObject *args)
{
    PyObject *snapshot, *deltas;
    int want_keys, want_values;
    if (!PyArg_ParseTuple(args, "OOpp:chain_columns", &snapshot, &deltas, &want_keys,
                          &want_values))
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
    values = keys == NULL ? NULL : want_values ? table_column(&c.t, 1, rows) : Py_NewRef(Py_None);
    if (values != NULL)
        result = Py_BuildValue("(nOO)", rows, keys, values);
done:
    Py_XDECREF(keys);
    Py_XDECREF(values);
    chain_release(&c);
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
     "chain_columns(snapshot or None, deltas, keys, values) -> (rows, key buffers or None, "
     "value buffers or None), each (int64 offsets, data), or None if a stream is not clean."},
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
    return PyModule_Create(&module);
}
