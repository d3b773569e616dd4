/* stormish._speedups: the per-row loops of the crossing path, compiled.

Optional: setup.py builds it where a C compiler is found, and every caller keeps its
pure-Python path (stormish/speedups.py picks). Each function here does exactly what
its Python twin does, row for row; tests/unit/test_speedups.py runs both on the same
input (hypothesis) and compares.

Why C: routing rows by a fields grouping is one dict lookup and one append a row. In
Python that loop costs ~65 ns a row (3.11, its best form); a word count on 2 workers
routes every word it splits, so the loop alone was ~8% of the run. Here ~10 ns.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#include "_refs.h"

#if PY_SSIZE_T_MAX <= 0xffffffffLL
#error "64-bit builds only: lengths of 32 bits are read into Py_ssize_t (pure Python runs)"
#endif

/* A row's field `fidx` (borrowed), or NULL (no error set) when the row is not an
exact tuple or list that long: the callers' slow paths say what is wrong. */
static PyObject *
row_key(PyObject *row, Py_ssize_t fidx)
{
    if (PyTuple_CheckExact(row))
        return fidx < PyTuple_GET_SIZE(row) ? PyTuple_GET_ITEM(row, fidx) : NULL;
    if (PyList_CheckExact(row))
        return fidx < PyList_GET_SIZE(row) ? PyList_GET_ITEM(row, fidx) : NULL;
    return NULL;
}

/* route_keyed(rows, fidx, cache, start) -> int

For rows[start:], in order: the outbox is cache[row[fidx]] and the row is appended to
it. Stops at the first row whose key is not in the cache, or is unhashable, or that is
not a tuple or list long enough, and returns that row's index: the caller routes
it the slow way (which fills the cache) and calls again from the next index. Returns
len(rows) when every row was placed. An outbox that is not a list is a miss too (a
fan-out picker's answer). */
static PyObject *
route_keyed(PyObject *self, PyObject *args)
{
    PyObject *rows, *cache;
    Py_ssize_t fidx, start;
    if (!PyArg_ParseTuple(args, "O!nO!n:route_keyed", &PyList_Type, &rows, &fidx,
                          &PyDict_Type, &cache, &start))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rows);
    if (fidx < 0) {
        PyErr_SetString(PyExc_ValueError, "route_keyed: fidx must be >= 0");
        return NULL;
    }
    if (start < 0)
        start = 0;
    for (Py_ssize_t i = start; i < n; i++) {
        if (PyList_GET_SIZE(rows) != n)  /* a key's __eq__ changed rows: stop here */
            return PyLong_FromSsize_t(i);
        PyObject *row = PyList_GET_ITEM(rows, i);
        PyObject *key = row_key(row, fidx);
        if (key == NULL)
            return PyLong_FromSsize_t(i);  /* a short or odd row: the slow path says */
        /* the key's __hash__/__eq__ may run Python code that changes rows or the row */
        Py_INCREF(row);
        Py_INCREF(key);
        PyObject *ob = PyDict_GetItemWithError(cache, key);
        Py_XINCREF(ob);
        Py_DECREF(key);
        if (ob == NULL || !PyList_Check(ob)) {
            Py_DECREF(row);
            if (ob != NULL)
                Py_DECREF(ob);  /* not an outbox: a fan-out picker's answer */
            else if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_TypeError))
                    return NULL;
                PyErr_Clear();  /* unhashable: the slow path says what it is */
            }
            return PyLong_FromSsize_t(i);
        }
        int rc = PyList_Append(ob, row);
        Py_DECREF(ob);
        Py_DECREF(row);
        if (rc < 0)
            return NULL;
    }
    return PyLong_FromSsize_t(n);
}


/* ---- typed rows: a batch of flat rows as one buffer -------------------------------

pack_rows(rows) -> bytes | None
unpack_rows(data, n) -> list of tuples (raises ValueError on anything malformed)

The layout (stormish/rowcodec.py is the pure-Python twin, and the reference):
    b"R" version(1) arity(u8) n(u32 LE), then n * arity values, each a tag byte and
    its payload: 0 None, 1 False, 2 True, 3 int (i64 LE), 4 float (f64 LE),
    5 str (u8 length, UTF-8), 6 str (u32 length, UTF-8), 7 bytes (u8 length),
    8 bytes (u32 length).
pack_rows answers None (the caller pickles) unless every row is an exact tuple of the
row count's arity (1..255) and every value is exactly one of those types (an int in
64 bits). Why: pickle spends ~75 ns a 1-word row to write and ~85 ns to read, most of
it in its opcode machinery; rows of plain values need none of it. */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} wbuf;

static int
wb_reserve(wbuf *w, Py_ssize_t more)
{
    if (w->len + more <= w->cap)
        return 0;
    Py_ssize_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + more)
        cap *= 2;
    char *b = PyMem_Realloc(w->buf, cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->buf = b;
    w->cap = cap;
    return 0;
}

static void
put_u32(char *p, uint32_t v)
{
    p[0] = (char)(v & 0xff);
    p[1] = (char)((v >> 8) & 0xff);
    p[2] = (char)((v >> 16) & 0xff);
    p[3] = (char)((v >> 24) & 0xff);
}

static uint32_t
get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static void
put_i64(char *p, long long x)
{
    uint64_t u = (uint64_t)x;
    for (int k = 0; k < 8; k++)
        p[k] = (char)((u >> (8 * k)) & 0xff);
}

static long long
get_i64(const unsigned char *p)
{
    uint64_t u = 0;
    for (int k = 0; k < 8; k++)
        u |= (uint64_t)p[k] << (8 * k);
    return (long long)u;
}

/* 0: *x is v, an exact int in 64 bits; 1: it is not (the caller pickles); -1: error */
static int
int_value(PyObject *v, long long *x)
{
    if (Py_TYPE(v) != &PyLong_Type)
        return 1;
    int overflow = 0;
    *x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow)
        return 1;
    return *x == -1 && PyErr_Occurred() ? -1 : 0;
}

/* 0: written; 1: not a plain value (the caller pickles); -1: an error is set */
static int
put_value(wbuf *w, PyObject *v)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) {
        Py_ssize_t size;
        const char *data = PyUnicode_AsUTF8AndSize(v, &size);
        if (data == NULL) {
            PyErr_Clear();  /* a lone surrogate: pickle keeps it */
            return 1;
        }
        if (size > 0xffffffffLL)
            return 1;
        if (wb_reserve(w, 5 + size) < 0)
            return -1;
        if (size < 256) {
            w->buf[w->len++] = 5;
            w->buf[w->len++] = (char)size;
        }
        else {
            w->buf[w->len++] = 6;
            put_u32(w->buf + w->len, (uint32_t)size);
            w->len += 4;
        }
        memcpy(w->buf + w->len, data, size);
        w->len += size;
        return 0;
    }
    if (t == &PyLong_Type) {
        long long x;
        int rc = int_value(v, &x);
        if (rc != 0)
            return rc;
        if (wb_reserve(w, 9) < 0)
            return -1;
        w->buf[w->len++] = 3;
        put_i64(w->buf + w->len, x);
        w->len += 8;
        return 0;
    }
    if (t == &PyFloat_Type) {
        if (wb_reserve(w, 9) < 0)
            return -1;
        w->buf[w->len++] = 4;
        if (PyFloat_Pack8(PyFloat_AS_DOUBLE(v), w->buf + w->len, 1) < 0)
            return -1;
        w->len += 8;
        return 0;
    }
    if (t == &PyBytes_Type) {
        Py_ssize_t size = PyBytes_GET_SIZE(v);
        if (size > 0xffffffffLL)
            return 1;
        if (wb_reserve(w, 5 + size) < 0)
            return -1;
        if (size < 256) {
            w->buf[w->len++] = 7;
            w->buf[w->len++] = (char)size;
        }
        else {
            w->buf[w->len++] = 8;
            put_u32(w->buf + w->len, (uint32_t)size);
            w->len += 4;
        }
        memcpy(w->buf + w->len, PyBytes_AS_STRING(v), size);
        w->len += size;
        return 0;
    }
    if (v == Py_None || v == Py_False || v == Py_True) {
        if (wb_reserve(w, 1) < 0)
            return -1;
        w->buf[w->len++] = v == Py_None ? 0 : v == Py_False ? 1 : 2;
        return 0;
    }
    return 1;
}

static PyObject *
pack_rows(PyObject *self, PyObject *rows)
{
    if (!PyList_CheckExact(rows)) {
        PyErr_SetString(PyExc_TypeError, "pack_rows: a list of rows expected");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(rows);
    if (n == 0 || n > 0xffffffffLL)
        Py_RETURN_NONE;
    PyObject *first = PyList_GET_ITEM(rows, 0);
    if (!PyTuple_CheckExact(first))
        Py_RETURN_NONE;
    Py_ssize_t arity = PyTuple_GET_SIZE(first);
    if (arity < 1 || arity > 255)
        Py_RETURN_NONE;
    wbuf w = {NULL, 0, 0};
    if (wb_reserve(&w, 7 + (n < 65536 ? n : 65536) * arity * 2) < 0)
        return NULL;
    w.buf[0] = 'R';
    w.buf[1] = 1;
    w.buf[2] = (char)arity;
    put_u32(w.buf + 3, (uint32_t)n);
    w.len = 7;
    /* no Python code runs below (exact types only), so rows cannot change under us */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != arity)
            goto plain;
        for (Py_ssize_t j = 0; j < arity; j++) {
            int rc = put_value(&w, PyTuple_GET_ITEM(row, j));
            if (rc > 0)
                goto plain;
            if (rc < 0) {
                PyMem_Free(w.buf);
                return NULL;
            }
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(w.buf, w.len);
    PyMem_Free(w.buf);
    return out;
plain:
    PyMem_Free(w.buf);
    Py_RETURN_NONE;
}

static PyObject *
malformed(const char *why, Py_ssize_t at)
{
    PyErr_Format(PyExc_ValueError, "typed rows: %s at byte %zd", why, at);
    return NULL;
}

/* Short ASCII strs read lately, by a hash of their bytes (direct-mapped, one per slot):
a word that crosses again is the same str object as last time. That skips making it, and
more: its SipHash is cached in it after the first dict lookup, and a dict keyed by it (a
count) finds it by identity. A word count's crossing words hit it nearly always. Strs
are immutable, so sharing one is invisible but to `is`; the table holds at most
STR_CACHE strs of at most STR_CACHE_LEN bytes. */
#define STR_CACHE 4096
#define STR_CACHE_LEN 32
static PyObject *str_cache[STR_CACHE];
/* Beside it, the one-value row of each cached str: rows of a single short str (a word, a
key) are shared too, so unpacking one is a lookup, not a tuple made and, after its
batch, freed (~30 ns a row of the ~45 each way). A tuple of an immutable str cannot
change, so sharing it is invisible but to `is`. */
static PyObject *row1_cache[STR_CACHE];

static uint32_t
str_slot(const unsigned char *p, Py_ssize_t size)
{
    uint32_t h = 2166136261u;  /* FNV-1a */
    for (Py_ssize_t k = 0; k < size; k++)
        h = (h ^ p[k]) * 16777619u;
    return h & (STR_CACHE - 1);
}

static PyObject *
cached_str(uint32_t slot, const unsigned char *p, Py_ssize_t size)
{
    PyObject *c = str_cache[slot];
    if (c != NULL && PyUnicode_GET_LENGTH(c) == size && memcmp(PyUnicode_DATA(c), p, size) == 0)
        return c;  /* cached strs are compact ASCII: same bytes, same str */
    return NULL;
}

/* A new str of the bytes, cached in `slot` when short and ASCII (`slot` is str_slot of
the bytes for those). */
static PyObject *
new_str(const unsigned char *p, Py_ssize_t size, uint32_t slot)
{
    /* copied first, then checked: the bytes may be a view of memory another process
       writes (a segment), and what was checked must be what the str holds */
    PyObject *s = PyUnicode_New(size, 127);
    if (s == NULL)
        return NULL;
    unsigned char *d = PyUnicode_DATA(s);
    memcpy(d, p, size);
    for (Py_ssize_t k = 0; k < size; k++) {
        if (d[k] & 0x80) {
            Py_DECREF(s);
            return PyUnicode_DecodeUTF8((const char *)p, size, "strict");
        }
    }
    if (size <= STR_CACHE_LEN)
        Py_XSETREF(str_cache[slot], Py_NewRef(s));
    return s;
}

static PyObject *
get_str(const unsigned char *p, Py_ssize_t size)
{
    uint32_t slot = 0;
    if (size <= STR_CACHE_LEN) {
        slot = str_slot(p, size);
        PyObject *c = cached_str(slot, p, size);
        if (c != NULL)
            return Py_NewRef(c);
    }
    return new_str(p, size, slot);
}

/* The row (str,) of a short str's bytes: the cached row when its str is cached, else a
new row, cached when its str now is (NULL and an exception on failure). */
static PyObject *
get_row1_str(const unsigned char *p, Py_ssize_t size)
{
    uint32_t slot = 0;
    PyObject *v = NULL;
    if (size <= STR_CACHE_LEN) {
        slot = str_slot(p, size);
        PyObject *c = cached_str(slot, p, size);
        if (c != NULL) {
            PyObject *r = row1_cache[slot];
            if (r != NULL && PyTuple_GET_ITEM(r, 0) == c)
                return Py_NewRef(r);
            v = Py_NewRef(c);
        }
    }
    if (v == NULL && (v = new_str(p, size, slot)) == NULL)
        return NULL;
    PyObject *row = PyTuple_New(1);
    if (row == NULL) {
        Py_DECREF(v);
        return NULL;
    }
    PyTuple_SET_ITEM(row, 0, v);
    if (size <= STR_CACHE_LEN && str_cache[slot] == v) {
        /* a tuple of one exact str is in no cycle: out of the collector's lists, which
           a static table outlives (an interpreter's lists end with it) */
        PyObject_GC_UnTrack(row);
        Py_XSETREF(row1_cache[slot], Py_NewRef(row));
    }
    return row;
}

static PyObject *
unpack_rows(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t expect;
    if (!PyArg_ParseTuple(args, "y*n:unpack_rows", &view, &expect))
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t size = view.len, at = 7;
    PyObject *out = NULL;
    if (size < 7 || p[0] != 'R' || p[1] != 1) {
        malformed("bad header", 0);
        goto done;
    }
    Py_ssize_t arity = p[2], n = get_u32(p + 3);
    if (arity < 1 || n != expect) {
        malformed("wrong arity or row count", 2);
        goto done;
    }
    if (n > (size - 7) / arity) {  /* every value takes at least its tag byte */
        malformed("more rows than bytes", 3);
        goto done;
    }
    out = PyList_New(n);
    if (out == NULL)
        goto done;
    PyObject_GC_UnTrack(out);  /* its NULL slots must not be seen by gc.get_objects() */
    PyObject *vals[255];
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len1;  /* read once: the bytes may be memory another process writes */
        if (arity == 1 && at + 1 < size && p[at] == 5 && (len1 = p[at + 1]) <= size - at - 2) {
            /* one short str: the shared row (get_row1_str) */
            Py_ssize_t len = len1;
            PyObject *row = get_row1_str(p + at + 2, len);
            if (row == NULL) {
                if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                    PyErr_Clear();
                    malformed("invalid UTF-8", at + 2);
                }
                goto fail;
            }
            at += 2 + len;
            PyList_SET_ITEM(out, i, row);
            continue;
        }
        for (j = 0; j < arity; j++) {
            if (at >= size) {
                malformed("truncated", at);
                goto fail;
            }
            unsigned char tag = p[at++];
            PyObject *v = NULL;
            Py_ssize_t len;
            switch (tag) {
            case 0:
                v = Py_NewRef(Py_None);
                break;
            case 1:
                v = Py_NewRef(Py_False);
                break;
            case 2:
                v = Py_NewRef(Py_True);
                break;
            case 3:
            case 4:
                if (size - at < 8) {
                    malformed("truncated number", at);
                    goto fail;
                }
                if (tag == 3)
                    v = PyLong_FromLongLong(get_i64(p + at));
                else {
                    double d = PyFloat_Unpack8((const char *)p + at, 1);
                    if (d == -1.0 && PyErr_Occurred())
                        goto fail;
                    v = PyFloat_FromDouble(d);
                }
                at += 8;
                break;
            case 5:
            case 6:
            case 7:
            case 8:
                if (tag == 5 || tag == 7) {
                    if (size - at < 1) {
                        malformed("truncated length", at);
                        goto fail;
                    }
                    len = p[at++];
                }
                else {
                    if (size - at < 4) {
                        malformed("truncated length", at);
                        goto fail;
                    }
                    len = get_u32(p + at);
                    at += 4;
                }
                if (size - at < len) {
                    malformed("truncated value", at);
                    goto fail;
                }
                if (tag <= 6) {
                    v = get_str(p + at, len);
                    if (v == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                        PyErr_Clear();
                        malformed("invalid UTF-8", at);
                        goto fail;
                    }
                }
                else
                    v = PyBytes_FromStringAndSize((const char *)p + at, len);
                at += len;
                break;
            default:
                malformed("unknown tag", at - 1);
                goto fail;
            }
            if (v == NULL)
                goto fail;
            vals[j] = v;
        }
        PyObject *row = PyTuple_New(arity);  /* filled before anything else allocates */
        if (row == NULL)
            goto fail;
        for (j = 0; j < arity; j++)
            PyTuple_SET_ITEM(row, j, vals[j]);
        j = 0;
        PyList_SET_ITEM(out, i, row);
    }
    if (at != size) {
        malformed("trailing bytes", at);
        goto fail;
    }
    PyObject_GC_Track(out);
    goto done;
fail:
    while (j > 0)
        Py_DECREF(vals[--j]);
    Py_CLEAR(out);
done:
    PyBuffer_Release(&view);
    return out;
}


/* route_str(rows, fidx, outboxes, start) -> int

Like route_keyed, for a fields grouping whose key is a str: the outbox is
outboxes[crc32(UTF-8 of the key) % len(outboxes)], the grouping's own stable hash
(runtime/grouping.py, stable_hash), computed here instead of looked up. Why: a word
split a moment ago has no cached hash yet, so the cache's dict lookup paid for a
SipHash of it (~30 ns) before the probe; CRC-32 of a short word costs a few ns and
needs no dict. Stops at the first row that is not a tuple or list long enough, or whose
key is not exactly a str that encodes (a lone surrogate; other types take the cache). */

static uint32_t crc_table[256];

static void
crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t
crc32_of(const unsigned char *p, Py_ssize_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (Py_ssize_t i = 0; i < n; i++)
        c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static PyObject *
crc32_str(PyObject *self, PyObject *arg)
{
    Py_ssize_t size;
    const char *data;
    if (PyUnicode_Check(arg)) {
        data = PyUnicode_AsUTF8AndSize(arg, &size);
        if (data == NULL)
            return NULL;
    }
    else if (PyBytes_Check(arg)) {
        data = PyBytes_AS_STRING(arg);
        size = PyBytes_GET_SIZE(arg);
    }
    else {
        PyErr_SetString(PyExc_TypeError, "crc32_str: a str or bytes expected");
        return NULL;
    }
    return PyLong_FromUnsignedLong(crc32_of((const unsigned char *)data, size));
}

static PyObject *
route_str(PyObject *self, PyObject *args)
{
    PyObject *rows, *outboxes;
    Py_ssize_t fidx, start;
    if (!PyArg_ParseTuple(args, "O!nO!n:route_str", &PyList_Type, &rows, &fidx,
                          &PyTuple_Type, &outboxes, &start))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rows), k = PyTuple_GET_SIZE(outboxes);
    if (k == 0) {
        PyErr_SetString(PyExc_ValueError, "route_str: no outboxes");
        return NULL;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        if (!PyList_Check(PyTuple_GET_ITEM(outboxes, j))) {
            PyErr_SetString(PyExc_TypeError, "route_str: outboxes must be lists");
            return NULL;
        }
    }
    if (fidx < 0) {
        PyErr_SetString(PyExc_ValueError, "route_str: fidx must be >= 0");
        return NULL;
    }
    if (start < 0)
        start = 0;
    /* no Python code runs in this loop (exact str keys, list appends), so rows and the
       rows in it cannot change under us; the outboxes tuple holds its lists */
    for (Py_ssize_t i = start; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i), *key = row_key(row, fidx);
        if (key == NULL || !PyUnicode_CheckExact(key))
            return PyLong_FromSsize_t(i);
        Py_ssize_t size;
        const char *data;
        if (PyUnicode_IS_COMPACT_ASCII(key)) {
            data = (const char *)PyUnicode_DATA(key);
            size = PyUnicode_GET_LENGTH(key);
        }
        else {
            data = PyUnicode_AsUTF8AndSize(key, &size);
            if (data == NULL) {
                PyErr_Clear();  /* a lone surrogate: the grouping's surrogatepass */
                return PyLong_FromSsize_t(i);
            }
        }
        uint32_t h = crc32_of((const unsigned char *)data, size);
        PyObject *ob = PyTuple_GET_ITEM(outboxes, (Py_ssize_t)(h % (uint32_t)k));
        if (PyList_Append(ob, row) < 0)
            return NULL;
    }
    return PyLong_FromSsize_t(n);
}


/* ---- tree ids: a tracked batch's metas as one buffer ------------------------------

pack_metas(metas) -> bytes | None
unpack_metas(data, n) -> list (raises ValueError on anything malformed)

A tracked row's meta is a tuple of (root id, edge id) pairs, one per anchor, or None
(an unanchored emit). Layout (rowcodec.py is the twin): b"M", version 1, n (u32 LE),
then per row a count byte (0xFF: None; else that many pairs) and the pairs as two
i64 LE each. Why: pickle spent ~220 ns writing and as much reading each ((root, e),)
of random 63-bit ids (a long opcode each, two tuples), the largest per-row cost left of
a tracked batch that crosses workers. */

static PyObject *
pack_metas(PyObject *self, PyObject *metas)
{
    if (!PyList_CheckExact(metas)) {
        PyErr_SetString(PyExc_TypeError, "pack_metas: a list expected");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(metas);
    if (n == 0 || n > 0xffffffffLL)
        Py_RETURN_NONE;
    wbuf w = {NULL, 0, 0};
    if (wb_reserve(&w, 7 + (n < 65536 ? n : 65536) * 17) < 0)
        return NULL;
    w.buf[0] = 'M';
    w.buf[1] = 1;
    put_u32(w.buf + 2, (uint32_t)n);
    w.len = 6;
    /* exact tuples and ints only: no Python code runs, metas cannot change under us */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(metas, i);
        if (m == Py_None) {
            if (wb_reserve(&w, 1) < 0)
                goto error;
            w.buf[w.len++] = (char)0xff;
            continue;
        }
        if (!PyTuple_CheckExact(m) || PyTuple_GET_SIZE(m) > 253)
            goto plain;
        Py_ssize_t k = PyTuple_GET_SIZE(m);
        if (wb_reserve(&w, 1 + 16 * k) < 0)
            goto error;
        w.buf[w.len++] = (char)k;
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *pair = PyTuple_GET_ITEM(m, j);
            if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2)
                goto plain;
            for (int h = 0; h < 2; h++) {
                long long x;
                int rc = int_value(PyTuple_GET_ITEM(pair, h), &x);
                if (rc > 0)
                    goto plain;
                if (rc < 0)
                    goto error;
                put_i64(w.buf + w.len, x);
                w.len += 8;
            }
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(w.buf, w.len);
    PyMem_Free(w.buf);
    return out;
plain:
    PyMem_Free(w.buf);
    Py_RETURN_NONE;
error:
    PyMem_Free(w.buf);
    return NULL;
}

static PyObject *
unpack_metas(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t expect;
    if (!PyArg_ParseTuple(args, "y*n:unpack_metas", &view, &expect))
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t size = view.len, at = 6;
    PyObject *out = NULL;
    if (size < 6 || p[0] != 'M' || p[1] != 1) {
        malformed("bad metas header", 0);
        goto done;
    }
    Py_ssize_t n = get_u32(p + 2);
    if (n != expect) {
        malformed("wrong metas count", 2);
        goto done;
    }
    if (n > size - 6) {  /* every row takes at least its count byte */
        malformed("more metas than bytes", 2);
        goto done;
    }
    out = PyList_New(n);
    if (out == NULL)
        goto done;
    PyObject_GC_UnTrack(out);  /* its NULL slots must not be seen by gc.get_objects() */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (at >= size) {
            malformed("truncated metas", at);
            goto fail;
        }
        Py_ssize_t k = p[at++];
        if (k == 0xff) {
            PyList_SET_ITEM(out, i, Py_NewRef(Py_None));
            continue;
        }
        if (k == 0xfe || size - at < 16 * k) {
            malformed(k == 0xfe ? "bad metas count" : "truncated metas", at - 1);
            goto fail;
        }
        /* each tuple is filled right after it is made (a tuple with NULL slots must not
           be seen by a collection): the pairs first, then the meta that holds them */
        PyObject *pairs[254];
        Py_ssize_t made = 0;
        for (; made < k; made++) {
            PyObject *a = PyLong_FromLongLong(get_i64(p + at));
            PyObject *b = a ? PyLong_FromLongLong(get_i64(p + at + 8)) : NULL;
            PyObject *pair = b ? PyTuple_New(2) : NULL;
            if (pair == NULL) {
                Py_XDECREF(a);
                Py_XDECREF(b);
                while (made > 0)
                    Py_DECREF(pairs[--made]);
                goto fail;
            }
            PyTuple_SET_ITEM(pair, 0, a);
            PyTuple_SET_ITEM(pair, 1, b);
            pairs[made] = pair;
            at += 16;
        }
        PyObject *m = PyTuple_New(k);
        if (m == NULL) {
            while (made > 0)
                Py_DECREF(pairs[--made]);
            goto fail;
        }
        for (Py_ssize_t j = 0; j < k; j++)
            PyTuple_SET_ITEM(m, j, pairs[j]);
        PyList_SET_ITEM(out, i, m);
    }
    if (at != size) {
        malformed("trailing metas bytes", at);
        goto fail;
    }
    PyObject_GC_Track(out);
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&view);
    return out;
}


/* ---- Emitter: a one-stream component's emit, compiled ------------------------------

Emitter(py, own, arity, size, flush, only, boxes, cache, fidx): what
UntrackedCollector.bound_emit's closure does, for the calls that matter: emit(values)
and emit(values, stream) with the component's one stream, a tuple or list of its width,
its one outbox (`only`) or a one-field fields grouping (a str key by the grouping's
CRC-32 over `boxes`, another key by the grouping's `cache`). Anything else (keywords, a
message id, another stream, a wrong width, a key not cached) calls `py`, the Python
closure, which routes, checks and raises as the method does. Why: the closure's call
was most of a per-tuple emit (~45 ns of ~85 on this machine, word count: 9 emits a
sentence); a vectorcall of a C object costs a fraction. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    /* one run of references, first to last (_refs.h) */
    PyObject *py, *own, *flush, *only, *boxes, *cache;
    Py_ssize_t arity, size, fidx;
    int own_is_default;
} Emitter;

static PyObject *
emitter_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Emitter *e = (Emitter *)obj;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || n < 1 || n > 2)
        goto slow;
    if (n == 1) {
        if (!e->own_is_default)
            goto slow;
    }
    else {
        PyObject *stream = args[1];
        if (stream != e->own &&
            (!PyUnicode_CheckExact(stream) || PyUnicode_Compare(stream, e->own) != 0))
            goto slow;
    }
    PyObject *values = args[0], *key;
    if (PyTuple_CheckExact(values)) {
        if (PyTuple_GET_SIZE(values) != e->arity)
            goto slow;
        key = e->only ? NULL : PyTuple_GET_ITEM(values, e->fidx);
    }
    else if (PyList_CheckExact(values)) {
        if (PyList_GET_SIZE(values) != e->arity)
            goto slow;
        key = e->only ? NULL : PyList_GET_ITEM(values, e->fidx);
    }
    else
        goto slow;
    PyObject *ob;
    if (e->only != NULL)
        ob = Py_NewRef(e->only);
    else if (PyUnicode_CheckExact(key) && PyUnicode_IS_COMPACT_ASCII(key)) {
        uint32_t h = crc32_of((const unsigned char *)PyUnicode_DATA(key),
                              PyUnicode_GET_LENGTH(key));
        ob = Py_NewRef(PyTuple_GET_ITEM(e->boxes, (Py_ssize_t)(h % (uint32_t)PyTuple_GET_SIZE(e->boxes))));
    }
    else {
        Py_INCREF(values);  /* the key's __hash__/__eq__ may run Python code */
        Py_INCREF(key);
        ob = PyDict_GetItemWithError(e->cache, key);
        Py_XINCREF(ob);
        Py_DECREF(key);
        Py_DECREF(values);
        if (ob == NULL) {
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_TypeError))
                    return NULL;
                PyErr_Clear();
            }
            goto slow;  /* not cached yet, or unhashable: the grouping decides */
        }
        if (!PyList_Check(ob)) {
            Py_DECREF(ob);
            goto slow;
        }
    }
    int rc = PyList_Append(ob, values);
    if (rc == 0 && PyList_GET_SIZE(ob) >= e->size) {
        PyObject *r = PyObject_CallOneArg(e->flush, ob);
        if (r == NULL)
            rc = -1;
        else
            Py_DECREF(r);
    }
    Py_DECREF(ob);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
slow:
    return PyObject_Vectorcall(e->py, args, nargsf, kwnames);
}

static PyObject *
emitter_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    /* one run of references, first to last (_refs.h) */
    PyObject *py, *own, *flush, *only, *boxes, *cache;
    Py_ssize_t arity, size, fidx;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Emitter: positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OUnnOOOOn:Emitter", &py, &own, &arity, &size, &flush,
                          &only, &boxes, &cache, &fidx))
        return NULL;
    if (!PyCallable_Check(py) || !PyCallable_Check(flush)) {
        PyErr_SetString(PyExc_TypeError, "Emitter: py and flush must be callable");
        return NULL;
    }
    if (arity < 1 || size < 1) {
        PyErr_SetString(PyExc_ValueError, "Emitter: arity and size must be >= 1");
        return NULL;
    }
    if (only == Py_None) {
        if (!PyTuple_CheckExact(boxes) || PyTuple_GET_SIZE(boxes) == 0 ||
            !PyDict_CheckExact(cache) || fidx < 0 || fidx >= arity) {
            PyErr_SetString(PyExc_TypeError,
                            "Emitter: without `only`, a tuple of outboxes, a dict and a "
                            "field index within the width");
            return NULL;
        }
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(boxes); j++) {
            if (!PyList_Check(PyTuple_GET_ITEM(boxes, j))) {
                PyErr_SetString(PyExc_TypeError, "Emitter: outboxes must be lists");
                return NULL;
            }
        }
    }
    else if (!PyList_Check(only)) {
        PyErr_SetString(PyExc_TypeError, "Emitter: `only` must be a list (an outbox)");
        return NULL;
    }
    Emitter *e = (Emitter *)type->tp_alloc(type, 0);
    if (e == NULL)
        return NULL;
    e->vectorcall = emitter_vectorcall;
    e->py = Py_NewRef(py);
    e->own = Py_NewRef(own);
    e->flush = Py_NewRef(flush);
    e->only = only == Py_None ? NULL : Py_NewRef(only);
    e->boxes = only == Py_None ? Py_NewRef(boxes) : NULL;
    e->cache = only == Py_None ? Py_NewRef(cache) : NULL;
    e->arity = arity;
    e->size = size;
    e->fidx = fidx;
    e->own_is_default = PyUnicode_CompareWithASCIIString(own, "default") == 0;
    return (PyObject *)e;
}

REFS_GC(emitter, Emitter, py, cache)

static PyObject *
emitter_repr(Emitter *e)
{
    return PyUnicode_FromFormat("<compiled emit on stream %R: %s>", e->own,
                                e->only ? "emit_one" : "emit_keyed");
}

static PyTypeObject EmitterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stormish._speedups.Emitter",
    .tp_basicsize = sizeof(Emitter),
    .tp_dealloc = refs_dealloc,
    .tp_vectorcall_offset = offsetof(Emitter, vectorcall),
    .tp_repr = (reprfunc)emitter_repr,
    .tp_call = refs_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A one-stream component's emit (UntrackedCollector.bound_emit), compiled.",
    .tp_traverse = emitter_traverse,
    .tp_clear = emitter_clear,
    .tp_new = emitter_new,
};

static PyMethodDef methods[] = {
    {"route_keyed", route_keyed, METH_VARARGS,
     "route_keyed(rows, fidx, cache, start) -> index of the first row not placed"},
    {"route_str", route_str, METH_VARARGS,
     "route_str(rows, fidx, outboxes, start) -> index of the first row not placed"},
    {"crc32_str", crc32_str, METH_O, "crc32_str(s) -> zlib.crc32 of s in UTF-8"},
    {"pack_metas", pack_metas, METH_O, "pack_metas(metas) -> bytes, or None: pickle"},
    {"unpack_metas", unpack_metas, METH_VARARGS, "unpack_metas(data, n) -> the n metas"},
    {"pack_rows", pack_rows, METH_O, "pack_rows(rows) -> bytes, or None: pickle them"},
    {"unpack_rows", unpack_rows, METH_VARARGS, "unpack_rows(data, n) -> the n rows"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "stormish._speedups",
    "The crossing path's per-row loops, compiled (optional).", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    crc_init();
    if (PyType_Ready(&EmitterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Emitter", (PyObject *)&EmitterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
