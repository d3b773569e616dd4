/* RootTable: a reliable spout's newest in-flight bucket (runtime/inflight.py), compiled.

A spout's roots come from a counter (ack_folder.AckFolder: a random start, a fixed step),
and trees mostly complete in the order they were emitted. So the bucket is an array
indexed by (root - base) / step: the emit's store is an append, a completion's pop is a
slot read, and nothing is hashed. What does not fit the array (another step, a root
behind it, a gap, an int too large, any other key) lives in `extra`, a dict, so the
table is a mapping as a dict is (ints compare by value; keys of other types are kept
apart from the array's ints, which roots never are).

The array is a window [first, end) of `slots`; first moves on past popped slots. A tree
that stays in flight while later ones complete would pin the window's start and let it
grow with every emit: when the window is more than half empty as it must grow, its
older half's entries move to `extra` (each once), so memory stays within a few times
what is in flight. Iteration order: `extra`, then the window in root order (an
emitter's insertion order).

With the step of its roots (RootTable(step)); used by stormish/_acking.c (TreeEmitter,
pop_many) through roottable_set / roottable_pop, and from Python as a mapping with
get / pop / items / keys / values / clear. Python's twin is a dict (inflight.py). */
#ifndef STORMISH_ROOTTABLE_H
#define STORMISH_ROOTTABLE_H

#include <Python.h>

#define RT_MAX_GAP 1024 /* a root this far past the window's end goes to extra */

typedef struct {
    PyObject_HEAD
    PyObject **slots;  /* slots[i]: the entry of root base + i * step, or NULL */
    Py_ssize_t first, end, cap, live;  /* live: non-NULL slots in [first, end) */
    unsigned long long base, step;
    PyObject *extra;  /* dict: every entry not in the window */
} RootTable;

static PyTypeObject RootTableType;  /* below */

#define RootTable_Check(o) (Py_TYPE(o) == &RootTableType)

/* the window index of `key`, or -1: not an exact int at a step of the window's base
(the caller then looks in extra); `*r` is its value when it is an int that fits */
static Py_ssize_t
rt_index(RootTable *t, PyObject *key, unsigned long long *r, int *fits)
{
    *fits = 0;
    if (!PyLong_CheckExact(key))
        return -1;
    /* PyLong_AsLongAndOverflow: a loop over the digits (3.11's AsUnsignedLongLong goes
    through a byte array, slower than the dict lookup this replaces) */
    int overflow;
    long sv = PyLong_AsLongAndOverflow(key, &overflow);
    unsigned long long v = (unsigned long long)sv;
    if (overflow > 0) {  /* 2^63 and up (a counter of 9 ackers and more may start there) */
        v = PyLong_AsUnsignedLongLong(key);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();  /* 2^64 and up: extra's */
            return -1;
        }
    }
    else if (overflow < 0 || sv < 0 || sizeof(long) < 8)  /* negative: extra's */
        return -1;
    *r = v;
    *fits = 1;
    if (t->first == t->end || v < t->base)
        return -1;
    unsigned long long d = v - t->base;
    if (t->step != 1) {  /* one division (one acker: none) */
        unsigned long long q = d / t->step;
        if (q * t->step != d)
            return -1;
        d = q;
    }
    if (d >= (unsigned long long)PY_SSIZE_T_MAX)
        return -1;
    return (Py_ssize_t)d;
}

static PyObject *
rt_key(RootTable *t, Py_ssize_t i)
{
    return PyLong_FromUnsignedLongLong(t->base + (unsigned long long)i * t->step);
}

/* past the popped slots at the window's start; an empty window starts again anywhere */
static inline void
rt_advance(RootTable *t)
{
    while (t->first < t->end && t->slots[t->first] == NULL)
        t->first++;
    if (t->first == t->end)
        t->first = t->end = 0;
}

/* room for `need` more slots at the end: the older half of a sparse window moved to
extra, the window slid down to the array's start, the array grown. The window's indexes
shift, not `need`; the window may be empty after (everything left was moved out). */
static int
rt_make_room(RootTable *t, Py_ssize_t need)
{
    Py_ssize_t span = t->end - t->first;
    if (span > 64 && t->live * 2 < span) {
        Py_ssize_t half = t->first + span / 2;
        for (Py_ssize_t i = t->first; i < half; i++) {
            PyObject *v = t->slots[i];
            if (v == NULL)
                continue;
            PyObject *k = rt_key(t, i);
            if (k == NULL || PyDict_SetItem(t->extra, k, v) < 0) {
                Py_XDECREF(k);
                return -1;
            }
            Py_DECREF(k);
            t->slots[i] = NULL;
            t->live--;
            Py_DECREF(v);
        }
        t->first = half;
        rt_advance(t);
    }
    if (t->first > 0) {
        Py_ssize_t n = t->end - t->first;
        memmove(t->slots, t->slots + t->first, (size_t)n * sizeof(PyObject *));
        t->base += (unsigned long long)t->first * t->step;
        t->first = 0;
        t->end = n;
    }
    Py_ssize_t cap = t->cap ? t->cap : 256;
    while (t->end + need > cap)
        cap *= 2;
    if (cap == t->cap)
        return 0;
    PyObject **s = PyMem_Realloc(t->slots, (size_t)cap * sizeof(PyObject *));
    if (s == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->slots = s;
    t->cap = cap;
    return 0;
}

/* t[key] = value (a new reference is taken) */
static int
roottable_set(RootTable *t, PyObject *key, PyObject *value)
{
    unsigned long long r;
    int fits;
    Py_ssize_t i = rt_index(t, key, &r, &fits);
    if (!fits)
        return PyDict_SetItem(t->extra, key, value);
    if (PyDict_GET_SIZE(t->extra)) {  /* a key is in one place only */
        int has = PyDict_Contains(t->extra, key);
        if (has != 0)
            return has < 0 ? -1 : PyDict_SetItem(t->extra, key, value);
    }
    if (t->first != t->end && (i < 0 || i < t->first || i > t->end + RT_MAX_GAP))
        return PyDict_SetItem(t->extra, key, value);
    if (t->first != t->end && i < t->end) {
        PyObject *old = t->slots[i];
        t->slots[i] = Py_NewRef(value);
        if (old == NULL)
            t->live++;
        else
            Py_DECREF(old);
        return 0;
    }
    Py_ssize_t need = t->first == t->end ? 1 : i - t->end + 1;  /* a gap's slots, then its */
    if (t->end + need > t->cap && rt_make_room(t, need) < 0)
        return -1;
    if (t->first == t->end) {  /* empty: the window starts at this root */
        t->base = r;
        t->first = t->end = 0;
        need = 1;
    }
    while (--need > 0)
        t->slots[t->end++] = NULL;
    t->slots[t->end++] = Py_NewRef(value);
    t->live++;
    return 0;
}

/* t.pop(key): a new reference, or NULL (with no error set) when absent */
static PyObject *
roottable_pop(RootTable *t, PyObject *key)
{
    unsigned long long r;
    int fits;
    Py_ssize_t i = rt_index(t, key, &r, &fits);
    if (i >= t->first && i < t->end) {
        PyObject *v = t->slots[i];
        if (v != NULL) {
            t->slots[i] = NULL;
            t->live--;
            if (i == t->first)
                rt_advance(t);
            return v;
        }
    }
    if (!PyDict_GET_SIZE(t->extra)) {
        if (!fits)
            (void)PyObject_Hash(key);  /* unhashable: its TypeError set, as a dict's */
        return NULL;
    }
    PyObject *v = PyDict_GetItemWithError(t->extra, key);
    if (v == NULL)
        return NULL;
    Py_INCREF(v);
    if (PyDict_DelItem(t->extra, key) < 0) {
        Py_DECREF(v);
        return NULL;
    }
    return v;
}

/* t.get(key): a borrowed reference, or NULL with no error set when absent */
static PyObject *
roottable_get(RootTable *t, PyObject *key)
{
    unsigned long long r;
    int fits;
    Py_ssize_t i = rt_index(t, key, &r, &fits);
    if (i >= t->first && i < t->end && t->slots[i] != NULL)
        return t->slots[i];
    return PyDict_GetItemWithError(t->extra, key);
}

/* the array taken away first, then its values released: a value's __del__ that writes
to the table then writes to a new array, not to slots being released */
static void
rt_clear_slots(RootTable *t)
{
    PyObject **slots = t->slots;
    Py_ssize_t first = t->first, end = t->end;
    t->slots = NULL;
    t->first = t->end = t->live = t->cap = 0;
    for (Py_ssize_t i = first; i < end; i++)
        Py_XDECREF(slots[i]);
    PyMem_Free(slots);
}

/* ---- the type: a mapping ----------------------------------------------------------- */

static PyObject *
rt_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    unsigned long long step = 1;
    static char *kwlist[] = {"step", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|K:RootTable", kwlist, &step))
        return NULL;
    if (step == 0 || step > (1ULL << 62)) {
        PyErr_SetString(PyExc_ValueError, "RootTable: the step is at least 1");
        return NULL;
    }
    RootTable *t = (RootTable *)type->tp_alloc(type, 0);
    if (t == NULL)
        return NULL;
    t->extra = PyDict_New();
    if (t->extra == NULL) {
        Py_DECREF(t);
        return NULL;
    }
    t->step = step;
    return (PyObject *)t;
}

static int
rt_traverse(RootTable *t, visitproc visit, void *arg)
{
    for (Py_ssize_t i = t->first; i < t->end; i++)
        Py_VISIT(t->slots[i]);
    Py_VISIT(t->extra);
    return 0;
}

/* the collector's clear empties `extra` but keeps it: a cleared table is still one */
static int
rt_clear(RootTable *t)
{
    rt_clear_slots(t);
    if (t->extra != NULL)
        PyDict_Clear(t->extra);
    return 0;
}

static void
rt_dealloc(RootTable *t)
{
    PyObject_GC_UnTrack(t);
    rt_clear_slots(t);
    Py_CLEAR(t->extra);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static Py_ssize_t
rt_len(RootTable *t)
{
    return t->live + PyDict_GET_SIZE(t->extra);
}

static PyObject *
rt_subscript(RootTable *t, PyObject *key)
{
    PyObject *v = roottable_get(t, key);
    if (v == NULL && !PyErr_Occurred())
        PyErr_SetObject(PyExc_KeyError, key);
    return Py_XNewRef(v);
}

static int
rt_ass_subscript(RootTable *t, PyObject *key, PyObject *value)
{
    if (value != NULL)
        return roottable_set(t, key, value);
    PyObject *v = roottable_pop(t, key);
    if (v == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, key);
        return -1;
    }
    Py_DECREF(v);
    return 0;
}

static int
rt_contains(RootTable *t, PyObject *key)
{
    PyObject *v = roottable_get(t, key);
    return v != NULL ? 1 : PyErr_Occurred() ? -1 : 0;
}

static PyObject *
rt_get(RootTable *t, PyObject *const *args, Py_ssize_t n)
{
    if (n < 1 || n > 2) {
        PyErr_SetString(PyExc_TypeError, "get(key, default=None)");
        return NULL;
    }
    PyObject *v = roottable_get(t, args[0]);
    if (v == NULL) {
        if (PyErr_Occurred())
            return NULL;
        v = n == 2 ? args[1] : Py_None;
    }
    return Py_NewRef(v);
}

static PyObject *
rt_pop(RootTable *t, PyObject *const *args, Py_ssize_t n)
{
    if (n < 1 || n > 2) {
        PyErr_SetString(PyExc_TypeError, "pop(key[, default])");
        return NULL;
    }
    PyObject *v = roottable_pop(t, args[0]);
    if (v != NULL || PyErr_Occurred())
        return v;
    if (n == 2)
        return Py_NewRef(args[1]);
    PyErr_SetObject(PyExc_KeyError, args[0]);
    return NULL;
}

/* 0: keys, 1: values, 2: (key, value) pairs; extra's first, then the window's. The
window is copied (values held) before anything that may run Python code (a collection,
a __del__ that writes to the table), so the list is the table as it was at the call. */
static PyObject *
rt_list(RootTable *t, int what)
{
    Py_ssize_t n = t->live, k = 0;
    unsigned long long base = t->base, step = t->step;
    PyObject **vals = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(PyObject *));
    Py_ssize_t *idx = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t));
    if (vals == NULL || idx == NULL) {
        PyMem_Free(vals);
        PyMem_Free(idx);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = t->first; i < t->end && k < n; i++)
        if (t->slots[i] != NULL) {
            vals[k] = Py_NewRef(t->slots[i]);
            idx[k++] = i;
        }
    PyObject *out = what == 0 ? PyDict_Keys(t->extra)
                    : what == 1 ? PyDict_Values(t->extra) : PyDict_Items(t->extra);
    for (Py_ssize_t j = 0; j < k && out != NULL; j++) {
        PyObject *item, *key = NULL;
        if (what != 1) {
            key = PyLong_FromUnsignedLongLong(base + (unsigned long long)idx[j] * step);
            if (key == NULL) {
                Py_CLEAR(out);
                break;
            }
        }
        item = what == 0 ? Py_NewRef(key) : what == 1 ? Py_NewRef(vals[j])
                                                      : PyTuple_Pack(2, key, vals[j]);
        Py_XDECREF(key);
        if (item == NULL || PyList_Append(out, item) < 0)
            Py_CLEAR(out);
        Py_XDECREF(item);
    }
    for (Py_ssize_t j = 0; j < k; j++)
        Py_DECREF(vals[j]);
    PyMem_Free(vals);
    PyMem_Free(idx);
    return out;
}

static PyObject *rt_keys(RootTable *t, PyObject *u) { return rt_list(t, 0); }
static PyObject *rt_values(RootTable *t, PyObject *u) { return rt_list(t, 1); }
static PyObject *rt_items(RootTable *t, PyObject *u) { return rt_list(t, 2); }

static PyObject *
rt_iter(RootTable *t)
{
    PyObject *keys = rt_list(t, 0);
    if (keys == NULL)
        return NULL;
    PyObject *it = PyObject_GetIter(keys);
    Py_DECREF(keys);
    return it;
}

static PyObject *
rt_clear_method(RootTable *t, PyObject *u)
{
    rt_clear_slots(t);
    PyDict_Clear(t->extra);
    Py_RETURN_NONE;
}

static PyObject *
rt_repr(RootTable *t)
{
    return PyUnicode_FromFormat("<RootTable: %zd in the window, %zd beside it>", t->live,
                                PyDict_GET_SIZE(t->extra));
}

static PyMethodDef rt_methods[] = {
    {"get", (PyCFunction)(void (*)(void))rt_get, METH_FASTCALL, "get(key, default=None)"},
    {"pop", (PyCFunction)(void (*)(void))rt_pop, METH_FASTCALL, "pop(key[, default])"},
    {"keys", (PyCFunction)rt_keys, METH_NOARGS, "the keys, as a list"},
    {"values", (PyCFunction)rt_values, METH_NOARGS, "the values, as a list"},
    {"items", (PyCFunction)rt_items, METH_NOARGS, "(key, value) pairs, as a list"},
    {"clear", (PyCFunction)rt_clear_method, METH_NOARGS, "remove every entry"},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods rt_as_mapping = {
    (lenfunc)rt_len, (binaryfunc)rt_subscript, (objobjargproc)rt_ass_subscript,
};

static PySequenceMethods rt_as_sequence = {
    .sq_contains = (objobjproc)rt_contains,
};

static PyTypeObject RootTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stormish._acking.RootTable",
    .tp_basicsize = sizeof(RootTable),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "RootTable(step=1): a spout's newest in-flight bucket, a mapping "
              "(stormish/_roottable.h)",
    .tp_new = rt_new,
    .tp_dealloc = (destructor)rt_dealloc,
    .tp_traverse = (traverseproc)rt_traverse,
    .tp_clear = (inquiry)rt_clear,
    .tp_repr = (reprfunc)rt_repr,
    .tp_as_mapping = &rt_as_mapping,
    .tp_as_sequence = &rt_as_sequence,
    .tp_iter = (getiterfunc)rt_iter,
    .tp_methods = rt_methods,
};

#endif
