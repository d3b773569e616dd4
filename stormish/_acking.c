/* stormish._acking: the per-tuple steps of XOR acking, compiled (optional).

Built beside stormish._speedups where a C compiler is found; every caller keeps its
Python path (stormish/runtime/fastack.py picks), and each piece here does what its
Python twin does, tuple for tuple: tests/unit/test_fastack.py runs both on the same
input and compares.

Why C: with acking on, what a reliable tuple costs beyond an unreliable one is a handful
of Python steps per tuple (a root from the counter, a meta of two tuples, an in-flight
store, an XOR per acked edge, each a bytecode dispatch and a fresh int), and the
closures that run them cost as much again in calls. Here they are one C call an emit
and one C pass a batch.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <structmember.h>

#include "_refs.h"
#include "_roottable.h"

static PyObject *s_pick_next, *s_metas, *s_stream, *s_anchors, *s_msg_id, *s_current;
/* Tuple and TrackedTuple, and their slots' offsets (set_tuple_types) */
static PyTypeObject *t_plain, *t_tracked;
static Py_ssize_t off_values, off_source, off_meta, off_ack_val;
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* ---- TreeEmitter: a reliable spout's emit, compiled --------------------------------

TreeEmitter(py, own, arity, size, flush, only, shuffle, head, roots, announce, compact):
what SpoutCollector.bound_emit's closure does for an emit with a message id on the
spout's one stream, with a tuple or list of its width: a root from `roots` (the
AckFolder's counter), the row in its outbox (`only`, or `shuffle.pick_next()`), the meta
((root, announce),) beside it in the outbox's `metas` (with `compact`, the root alone: a
root meta, ack_folder.py), `head[root] = msg_id` (the in-flight map's newest bucket),
and the outbox flushed when full. Anything else (no
message id, another stream, a wrong width, an unknown keyword) calls `py`, the Python
closure, which routes, checks and raises as the method does. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    /* one run of references, first to last (_refs.h) */
    PyObject *py, *own, *flush, *only, *only_metas, *shuffle, *head, *roots, *announce;
    Py_ssize_t arity, size;
    int own_is_default, compact;
} TreeEmitter;

static int
same_str(PyObject *a, PyObject *b)
{
    return a == b || (PyUnicode_CheckExact(a) && PyUnicode_Compare(a, b) == 0);
}

/* The call's (values, stream, anchors, msg_id) into `a` (NULL: not given); 0 when the
call is one the Python closure must take (its signature decides what is an error). */
static int
emit_args(PyObject *const *args, size_t nargsf, PyObject *kwnames, PyObject **a)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n < 1 || n > 4)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        a[i] = args[i];
    if (kwnames != NULL) {
        Py_ssize_t k = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, j);
            int idx;
            if (same_str(name, s_msg_id))
                idx = 3;
            else if (same_str(name, s_stream))
                idx = 1;
            else if (same_str(name, s_anchors))
                idx = 2;
            else
                return 0;
            if (a[idx] != NULL)
                return 0;
            a[idx] = args[n + j];
        }
    }
    return 1;
}

static PyObject *
tree_emitter_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                        PyObject *kwnames)
{
    TreeEmitter *e = (TreeEmitter *)obj;
    PyObject *a[4] = {NULL, NULL, NULL, NULL};
    if (!emit_args(args, nargsf, kwnames, a))
        goto slow;
    PyObject *values = a[0], *stream = a[1], *msg_id = a[3];
    if (msg_id == NULL || msg_id == Py_None)
        goto slow;
    if (stream == NULL ? !e->own_is_default : !same_str(stream, e->own))
        goto slow;
    if (PyTuple_CheckExact(values)) {
        if (PyTuple_GET_SIZE(values) != e->arity)
            goto slow;
    }
    else if (!PyList_CheckExact(values) || PyList_GET_SIZE(values) != e->arity)
        goto slow;

    PyObject *ob, *metas;
    if (e->only != NULL) {
        ob = Py_NewRef(e->only);
        metas = Py_NewRef(e->only_metas);
    }
    else {
        /* the shuffle's rotation is rebuilt on refresh: read it each time, as Python */
        PyObject *pick = PyObject_GetAttr(e->shuffle, s_pick_next);
        if (pick == NULL)
            return NULL;
        ob = PyObject_CallNoArgs(pick);
        Py_DECREF(pick);
        if (ob == NULL)
            return NULL;
        metas = PyObject_GetAttr(ob, s_metas);
        if (metas == NULL) {
            Py_DECREF(ob);
            return NULL;
        }
        if (!PyList_Check(ob) || !PyList_Check(metas)) {
            Py_DECREF(ob);
            Py_DECREF(metas);
            PyErr_SetString(PyExc_TypeError, "TreeEmitter: an outbox and its metas are lists");
            return NULL;
        }
    }
    PyObject *root = NULL, *pair = NULL, *meta = NULL;
    int rc = -1;
    root = (*Py_TYPE(e->roots)->tp_iternext)(e->roots);
    if (root == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "a spout task ran out of tree roots");
        goto done;
    }
    if (e->compact) {  /* a root meta: the announcement is the batch's source task's */
        meta = Py_NewRef(root);
        goto append;
    }
    pair = PyTuple_Pack(2, root, e->announce);
    if (pair == NULL)
        goto done;
    meta = PyTuple_Pack(1, pair);
    if (meta == NULL)
        goto done;
    /* ints inside tuples: no cycle can pass through these two, so the collector need
    not look at them (CPython untracks such tuples itself, later) */
    if (PyLong_CheckExact(root) && PyLong_CheckExact(e->announce)) {
        PyObject_GC_UnTrack(pair);
        PyObject_GC_UnTrack(meta);
    }
append:
    if (PyList_Append(ob, values) < 0)
        goto done;
    if (PyList_Append(metas, meta) < 0) {
        Py_ssize_t last = PyList_GET_SIZE(ob) - 1;
        PyList_SetSlice(ob, last, last + 1, NULL);
        goto done;
    }
    if ((RootTable_Check(e->head) ? roottable_set((RootTable *)e->head, root, msg_id)
                                  : PyDict_SetItem(e->head, root, msg_id)) < 0)
        goto done;
    rc = 0;
    if (PyList_GET_SIZE(ob) >= e->size) {
        PyObject *r = PyObject_CallOneArg(e->flush, ob);
        if (r == NULL)
            rc = -1;
        else
            Py_DECREF(r);
    }
done:
    Py_XDECREF(root);
    Py_XDECREF(pair);
    Py_XDECREF(meta);
    Py_DECREF(ob);
    Py_DECREF(metas);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
slow:
    return PyObject_Vectorcall(e->py, args, nargsf, kwnames);
}

static PyObject *
tree_emitter_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *py, *own, *flush, *only, *shuffle, *head, *roots, *announce;
    Py_ssize_t arity, size;
    int compact;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "TreeEmitter: positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OUnnOOOOOO!p:TreeEmitter", &py, &own, &arity, &size,
                          &flush, &only, &shuffle, &head, &roots, &PyLong_Type, &announce,
                          &compact))
        return NULL;
    if (!PyDict_Check(head) && !RootTable_Check(head)) {
        PyErr_SetString(PyExc_TypeError, "TreeEmitter: head is a dict or a RootTable");
        return NULL;
    }
    if (!PyCallable_Check(py) || !PyCallable_Check(flush)) {
        PyErr_SetString(PyExc_TypeError, "TreeEmitter: py and flush must be callable");
        return NULL;
    }
    if (arity < 0 || size < 1) {
        PyErr_SetString(PyExc_ValueError, "TreeEmitter: arity >= 0 and size >= 1");
        return NULL;
    }
    if (!PyIter_Check(roots)) {
        PyErr_SetString(PyExc_TypeError, "TreeEmitter: roots must be an iterator");
        return NULL;
    }
    PyObject *only_metas = NULL;
    if (only != Py_None) {
        if (!PyList_Check(only)) {
            PyErr_SetString(PyExc_TypeError, "TreeEmitter: `only` must be a list (an outbox)");
            return NULL;
        }
        only_metas = PyObject_GetAttr(only, s_metas);
        if (only_metas == NULL)
            return NULL;
        if (!PyList_Check(only_metas)) {
            Py_DECREF(only_metas);
            PyErr_SetString(PyExc_TypeError, "TreeEmitter: the outbox's metas must be a list");
            return NULL;
        }
    }
    else if (shuffle == Py_None) {
        PyErr_SetString(PyExc_TypeError, "TreeEmitter: an outbox (`only`) or a shuffle");
        return NULL;
    }
    TreeEmitter *e = (TreeEmitter *)type->tp_alloc(type, 0);
    if (e == NULL) {
        Py_XDECREF(only_metas);
        return NULL;
    }
    e->vectorcall = tree_emitter_vectorcall;
    e->py = Py_NewRef(py);
    e->own = Py_NewRef(own);
    e->flush = Py_NewRef(flush);
    e->only = only == Py_None ? NULL : Py_NewRef(only);
    e->only_metas = only_metas;
    e->shuffle = only == Py_None ? Py_NewRef(shuffle) : NULL;
    e->head = Py_NewRef(head);
    e->roots = Py_NewRef(roots);
    e->announce = Py_NewRef(announce);
    e->arity = arity;
    e->size = size;
    e->own_is_default = PyUnicode_CompareWithASCIIString(own, "default") == 0;
    e->compact = compact;
    return (PyObject *)e;
}

REFS_GC(tree_emitter, TreeEmitter, py, announce)

static PyObject *
tree_emitter_repr(TreeEmitter *e)
{
    return PyUnicode_FromFormat("<compiled reliable emit on stream %R: %s>", e->own,
                                e->only ? "one outbox" : "shuffled");
}

static PyTypeObject TreeEmitterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stormish._acking.TreeEmitter",
    .tp_basicsize = sizeof(TreeEmitter),
    .tp_dealloc = refs_dealloc,
    .tp_vectorcall_offset = offsetof(TreeEmitter, vectorcall),
    .tp_repr = (reprfunc)tree_emitter_repr,
    .tp_call = refs_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A reliable spout's emit (SpoutCollector.bound_emit), compiled.",
    .tp_traverse = tree_emitter_traverse,
    .tp_clear = tree_emitter_clear,
    .tp_new = tree_emitter_new,
};

/* True when `col.current` is a plain entry of its __dict__: the generic setattr, and no
data descriptor of that name on its class (a class attribute or a method is fine: the
instance's dict wins over those). Then reading and writing the dict is what the
attribute access does. */
static int
plain_current(PyObject *col)
{
    PyTypeObject *tp = Py_TYPE(col);
    if (tp->tp_setattro != PyObject_GenericSetAttr || tp->tp_getattro != PyObject_GenericGetAttr ||
        !tp->tp_dictoffset)
        return 0;
    PyObject *d = _PyType_Lookup(tp, s_current);
    return d == NULL || Py_TYPE(d)->tp_descr_set == NULL;
}

/* ---- AnchoredEmitter: a BasicBolt's emit with acking on, compiled --------------------

AnchoredEmitter(py, col, own, arity, size, flush, only, cache, fidx, rand): what
BasicCollector.bound_emit's closure does for the common call: an emit on the bolt's one
stream, of its width, anchored to the input being executed (`col.current`, a
TrackedTuple in one tree, whose values are a plain tuple or list), to its one outbox
(`only`) or by a one-field fields grouping's cache (`cache[values[fidx]]`): a fresh
edge `rand(63)` XORed into the input's ack value, the row in the outbox and
((root, edge),) beside it, the outbox flushed when full. Anything else (explicit
anchors, another stream, a wrong width, an input in no tree or several, traced values,
a key not cached) calls `py`, the Python closure. Needs set_tuple_types (run_basic's). */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    /* one run of references, first to last (_refs.h) */
    PyObject *py, *cdict, *own, *flush, *only, *cache, *rand, *bits;
    Py_ssize_t arity, size, fidx;
    int own_is_default;
} AnchoredEmitter;

static PyObject *
anchored_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    AnchoredEmitter *e = (AnchoredEmitter *)obj;
    PyObject *a[4] = {NULL, NULL, NULL, NULL};
    if (!emit_args(args, nargsf, kwnames, a))
        goto slow;
    PyObject *values = a[0], *stream = a[1];
    if (a[2] != NULL && a[2] != Py_None)
        goto slow;
    if (stream == NULL ? !e->own_is_default : !same_str(stream, e->own))
        goto slow;
    PyObject *key;
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
    PyObject *cur = PyDict_GetItemWithError(e->cdict, s_current);
    if (cur == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto slow;
    }
    if (Py_TYPE(cur) != t_tracked)
        goto slow;
    PyObject *meta = SLOT(cur, off_meta), *cv = SLOT(cur, off_values);
    /* a root meta (ack_folder.py) is its tree's root itself */
    int root_meta = meta != NULL && PyLong_CheckExact(meta);
    if (meta == NULL ||
        !(root_meta || (PyTuple_CheckExact(meta) && PyTuple_GET_SIZE(meta) == 1)) ||
        cv == NULL || !(PyTuple_CheckExact(cv) || PyList_CheckExact(cv)) ||
        SLOT(cur, off_ack_val) == NULL)
        goto slow;  /* several trees, or traced values: the closure */
    if (!root_meta) {
        PyObject *p = PyTuple_GET_ITEM(meta, 0);
        if (!PyTuple_CheckExact(p) || PyTuple_GET_SIZE(p) != 2)
            goto slow;
    }
    PyObject *ob;
    /* held, as the closure's locals `cur` and `meta` hold them: a key's __hash__/__eq__
    may run Python code that moves the collector on or rewrites cur.meta */
    Py_INCREF(cur);
    Py_INCREF(meta);
    if (e->only != NULL)
        ob = Py_NewRef(e->only);
    else {
        Py_INCREF(values);
        Py_INCREF(key);
        ob = PyDict_GetItemWithError(e->cache, key);
        Py_XINCREF(ob);
        Py_DECREF(key);
        Py_DECREF(values);
        if (ob == NULL || !PyList_Check(ob)) {
            Py_XDECREF(ob);
            Py_DECREF(cur);
            Py_DECREF(meta);
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_TypeError) &&
                    !PyErr_ExceptionMatches(PyExc_KeyError))
                    return NULL;
                PyErr_Clear();  /* the closure's `except (KeyError, TypeError)` */
            }
            goto slow;  /* not cached yet, or unhashable: the grouping decides */
        }
    }
    /* meta[0][0] of the meta read before the lookup, as the closure does */
    PyObject *root =
        Py_NewRef(root_meta ? meta : PyTuple_GET_ITEM(PyTuple_GET_ITEM(meta, 0), 0));
    Py_DECREF(meta);
    PyObject *metas = NULL, *edge = NULL, *nv = NULL, *pair = NULL, *m1 = NULL;
    int rc = -1;
    metas = PyObject_GetAttr(ob, s_metas);
    if (metas == NULL)
        goto done;
    if (!PyList_Check(metas)) {
        PyErr_SetString(PyExc_TypeError, "AnchoredEmitter: an outbox's metas are a list");
        goto done;
    }
    edge = PyObject_CallOneArg(e->rand, e->bits);
    if (edge == NULL)
        goto done;
    PyObject *old = SLOT(cur, off_ack_val);
    nv = PyNumber_Xor(old, edge);
    if (nv == NULL)
        goto done;
    pair = PyTuple_Pack(2, root, edge);
    if (pair == NULL)
        goto done;
    m1 = PyTuple_Pack(1, pair);
    if (m1 == NULL)
        goto done;
    if (PyLong_CheckExact(root) && PyLong_CheckExact(edge)) {  /* no cycle through ints */
        PyObject_GC_UnTrack(pair);
        PyObject_GC_UnTrack(m1);
    }
    if (PyList_Append(ob, values) < 0)
        goto done;
    if (PyList_Append(metas, m1) < 0) {
        /* keep the outbox's rows and metas the same length */
        Py_ssize_t last = PyList_GET_SIZE(ob) - 1;
        PyList_SetSlice(ob, last, last + 1, NULL);
        goto done;
    }
    Py_XSETREF(SLOT(cur, off_ack_val), Py_NewRef(nv));
    rc = 0;
    if (PyList_GET_SIZE(ob) >= e->size) {
        PyObject *r = PyObject_CallOneArg(e->flush, ob);
        if (r == NULL)
            rc = -1;
        else
            Py_DECREF(r);
    }
done:
    Py_XDECREF(metas);
    Py_XDECREF(edge);
    Py_XDECREF(nv);
    Py_XDECREF(pair);
    Py_XDECREF(m1);
    Py_DECREF(root);
    Py_DECREF(cur);
    Py_DECREF(ob);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
slow:
    return PyObject_Vectorcall(e->py, args, nargsf, kwnames);
}

static PyObject *
anchored_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *py, *col, *own, *flush, *only, *cache, *rand;
    Py_ssize_t arity, size, fidx;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "AnchoredEmitter: positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOUnnOOOnO:AnchoredEmitter", &py, &col, &own, &arity, &size,
                          &flush, &only, &cache, &fidx, &rand))
        return NULL;
    if (t_tracked == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "AnchoredEmitter: set_tuple_types was not called");
        return NULL;
    }
    if (!PyCallable_Check(py) || !PyCallable_Check(flush) || !PyCallable_Check(rand)) {
        PyErr_SetString(PyExc_TypeError, "AnchoredEmitter: py, flush and rand must be callable");
        return NULL;
    }
    if (arity < 0 || size < 1) {
        PyErr_SetString(PyExc_ValueError, "AnchoredEmitter: arity >= 0 and size >= 1");
        return NULL;
    }
    if (only == Py_None) {
        if (!PyDict_CheckExact(cache) || fidx < 0 || fidx >= arity) {
            PyErr_SetString(PyExc_TypeError,
                            "AnchoredEmitter: without `only`, a dict and a field index within "
                            "the width");
            return NULL;
        }
    }
    else if (!PyList_Check(only)) {
        PyErr_SetString(PyExc_TypeError, "AnchoredEmitter: `only` must be a list (an outbox)");
        return NULL;
    }
    if (!plain_current(col)) {
        PyErr_SetString(PyExc_TypeError,
                        "AnchoredEmitter: the collector keeps `current` in its __dict__");
        return NULL;
    }
    PyObject *cdict = PyObject_GenericGetDict(col, NULL);
    if (cdict == NULL)
        return NULL;
    AnchoredEmitter *e = (AnchoredEmitter *)type->tp_alloc(type, 0);
    if (e == NULL) {
        Py_DECREF(cdict);
        return NULL;
    }
    e->vectorcall = anchored_vectorcall;
    e->py = Py_NewRef(py);
    e->cdict = cdict;
    e->own = Py_NewRef(own);
    e->flush = Py_NewRef(flush);
    e->only = only == Py_None ? NULL : Py_NewRef(only);
    e->cache = only == Py_None ? Py_NewRef(cache) : NULL;
    e->rand = Py_NewRef(rand);
    e->bits = PyLong_FromLong(63);
    e->arity = arity;
    e->size = size;
    e->fidx = fidx;
    e->own_is_default = PyUnicode_CompareWithASCIIString(own, "default") == 0;
    if (e->bits == NULL) {
        Py_DECREF(e);
        return NULL;
    }
    return (PyObject *)e;
}

REFS_GC(anchored, AnchoredEmitter, py, bits)

static PyObject *
anchored_repr(AnchoredEmitter *e)
{
    return PyUnicode_FromFormat("<compiled anchored emit on stream %R: %s>", e->own,
                                e->only ? "one outbox" : "keyed");
}

static PyTypeObject AnchoredEmitterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stormish._acking.AnchoredEmitter",
    .tp_basicsize = sizeof(AnchoredEmitter),
    .tp_dealloc = refs_dealloc,
    .tp_vectorcall_offset = offsetof(AnchoredEmitter, vectorcall),
    .tp_repr = (reprfunc)anchored_repr,
    .tp_call = refs_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A BasicBolt's anchored emit (BasicCollector.bound_emit), compiled.",
    .tp_traverse = anchored_traverse,
    .tp_clear = anchored_clear,
    .tp_new = anchored_new,
};

/* ---- fold_runs ------------------------------------------------------------------------

fold_runs(metas, acks, announced, done, start) -> int: ack_folder.fold_runs over
metas[start:], for metas that are None, root metas (exact ints: (root, announced)) or
exact tuples of exact (int, int) tuples.
Stops before the first other meta, with every run so far folded into `acks`, and
returns its index (len(metas) when all were folded): the Python twin takes the rest.
`done` is a list or None. */

/* XOR `x` into acks[root] (acks.get(root, 0) ^ x). */
static int
xor_into(PyObject *acks, PyObject *root, PyObject *x)
{
    PyObject *old = PyDict_GetItemWithError(acks, root);
    if (old == NULL) {
        if (PyErr_Occurred())
            return -1;
        return PyDict_SetItem(acks, root, x);
    }
    PyObject *nx = PyNumber_Xor(old, x);
    if (nx == NULL)
        return -1;
    int rc = PyDict_SetItem(acks, root, nx);
    Py_DECREF(nx);
    return rc;
}

/* A run's XOR: `small` (edges of 64 bits, XORed in C) and `big` (anything wider: an
announcement folded in as an edge), NULL when there is none. */
typedef struct {
    PyObject *root;  /* owned: a dict compare may run Python code that empties metas */
    unsigned long long small;
    PyObject *big;
} Run;

static int
run_flush(PyObject *acks, Run *run)
{
    if (run->root == NULL)
        return 0;
    PyObject *x = PyLong_FromUnsignedLongLong(run->small);
    if (x == NULL)
        return -1;
    if (run->big != NULL) {
        PyObject *t = PyNumber_Xor(x, run->big);
        Py_DECREF(x);
        Py_CLEAR(run->big);
        if (t == NULL)
            return -1;
        x = t;
    }
    int rc = xor_into(acks, run->root, x);
    Py_DECREF(x);
    Py_CLEAR(run->root);
    run->small = 0;
    return rc;
}

static int
run_add(Run *run, PyObject *e)
{
    unsigned long long v = PyLong_AsUnsignedLongLong(e);
    if (v != (unsigned long long)-1 || !PyErr_Occurred()) {
        run->small ^= v;
        return 0;
    }
    PyErr_Clear();  /* wider than 64 bits (or negative): Python's XOR */
    if (run->big == NULL) {
        run->big = Py_NewRef(e);
        return 0;
    }
    PyObject *t = PyNumber_Xor(run->big, e);
    if (t == NULL)
        return -1;
    Py_SETREF(run->big, t);
    return 0;
}

static int
is_pair(PyObject *p)
{
    return PyTuple_CheckExact(p) && PyTuple_GET_SIZE(p) == 2 &&
           PyLong_CheckExact(PyTuple_GET_ITEM(p, 0)) && PyLong_CheckExact(PyTuple_GET_ITEM(p, 1));
}

static PyObject *
fold_runs(PyObject *self, PyObject *args)
{
    PyObject *metas, *acks, *announced, *done;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "O!O!O!On:fold_runs", &PyList_Type, &metas, &PyDict_Type,
                          &acks, &PyLong_Type, &announced, &done, &start))
        return NULL;
    if (done != Py_None && !PyList_Check(done)) {
        PyErr_SetString(PyExc_TypeError, "fold_runs: done must be a list or None");
        return NULL;
    }
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL)
        return NULL;
    int announced_neg = PyObject_RichCompareBool(announced, zero, Py_LT);
    Py_DECREF(zero);
    if (announced_neg < 0)
        return NULL;
    Py_INCREF(metas);
    Run run = {NULL, 0, NULL};
    PyObject *m = NULL;
    Py_ssize_t i = start < 0 ? 0 : start;
    /* the live size and an owned meta: a key of `acks` with a Python __eq__ may change metas */
    for (; i < PyList_GET_SIZE(metas); i++) {
        Py_XSETREF(m, Py_NewRef(PyList_GET_ITEM(metas, i)));
        if (m == Py_None)
            continue;
        PyObject *r, *e;
        if (PyLong_CheckExact(m)) {  /* a root meta: (m, the announcement) */
            if (announced_neg)
                break;  /* not from a spout: the Python twin says so */
            r = m;
            e = announced;
        }
        else {
            if (!PyTuple_CheckExact(m))
                break;
            Py_ssize_t k = PyTuple_GET_SIZE(m);
            Py_ssize_t j = 0;
            for (; j < k && is_pair(PyTuple_GET_ITEM(m, j)); j++)
                ;
            if (j < k)
                break;  /* not (int, int) pairs: the Python twin says what it is */
            if (k != 1) {  /* no tree (an empty meta), or several: each pair to the dict */
                for (j = 0; j < k; j++) {
                    PyObject *p = PyTuple_GET_ITEM(m, j);
                    if (xor_into(acks, PyTuple_GET_ITEM(p, 0), PyTuple_GET_ITEM(p, 1)) < 0)
                        goto error;
                }
                continue;
            }
            PyObject *p = PyTuple_GET_ITEM(m, 0);
            r = PyTuple_GET_ITEM(p, 0);
            e = PyTuple_GET_ITEM(p, 1);
        }
        if (done != Py_None) {
            int eq = e == announced ? 1 : PyObject_RichCompareBool(e, announced, Py_EQ);
            if (eq < 0)
                goto error;
            if (eq) {
                if (PyList_Append(done, r) < 0)
                    goto error;
                continue;
            }
        }
        if (run.root != NULL) {
            int same = r == run.root ? 1 : PyObject_RichCompareBool(r, run.root, Py_EQ);
            if (same < 0)
                goto error;
            if (!same && run_flush(acks, &run) < 0)
                goto error;
        }
        if (run.root == NULL)
            run.root = Py_NewRef(r);
        if (run_add(&run, e) < 0)
            goto error;
    }
    Py_CLEAR(m);
    if (run_flush(acks, &run) < 0)
        goto error;
    Py_DECREF(metas);
    return PyLong_FromSsize_t(i);
error:
    Py_XDECREF(m);
    Py_XDECREF(run.root);
    Py_XDECREF(run.big);
    Py_DECREF(metas);
    return NULL;
}

/* ---- run_basic: a BasicBolt's per-tuple loop, compiled ---------------------------

set_tuple_types(Tuple, TrackedTuple) once (fastack does): the slots' offsets, read off
their member descriptors, so a tuple is made as `object.__new__` makes it and its slots
written as Python writes them.

run_basic(values, metas, start, source, execute, col, anchored) -> None, or
(i, tuple, exception): per_tuple.PerTuple.run's BasicBolt loop over rows[start:]: a
TrackedTuple (meta, ack value 0) for a row with a meta, a Tuple for one without, the
collector's `current` set to it, `execute` called; a tuple whose emits were anchored to
it (a non-zero ack value) adds (meta, ack value) to `anchored`. An Exception from
execute stops the loop: returned with its row's index and tuple, for the caller's
failure path, which calls again from the next row. Anything else raised (KeyboardInterrupt)
propagates. `metas` None: every row is a Tuple (acking off).

`pending`, `stop` (optional): the collector's pendingEmitQ (a deque) and what says
whether the loop stops for it. Before each row, when `pending` is not empty (its length
read through the type's slot: all an unparked row pays) and `stop()` is true, the loop
returns that row's index, an int: Storm's bolt stops consuming at the tuple after which
its emits parked (BoltExecutor's tillNoPendingEmits, checked by JCQueue.consume before
each element), and the caller puts the rest back at the head of its input.

A tuple nothing kept once its execute returned (only this loop and the collector's
`current` refer to it: the classes have no weakref slot, so nothing else can) is the next
row's tuple, its slots rewritten: a tuple a row fewer to allocate and free. Whatever its
execute kept keeps its tuple; a new one is made for the next row. */


static Py_ssize_t
slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *d = PyObject_GetAttrString((PyObject *)type, name);
    if (d == NULL)
        return -1;
    Py_ssize_t off = -1;
    if (Py_IS_TYPE(d, &PyMemberDescr_Type) &&
        ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX)
        off = ((PyMemberDescrObject *)d)->d_member->offset;
    else
        PyErr_Format(PyExc_TypeError, "set_tuple_types: %s.%s is not a slot", type->tp_name,
                     name);
    Py_DECREF(d);
    return off;
}

static PyObject *
set_tuple_types(PyObject *self, PyObject *args)
{
    PyTypeObject *plain, *tracked;
    if (!PyArg_ParseTuple(args, "O!O!:set_tuple_types", &PyType_Type, &plain, &PyType_Type,
                          &tracked))
        return NULL;
    if (!PyType_IsSubtype(tracked, plain)) {
        PyErr_SetString(PyExc_TypeError, "set_tuple_types: TrackedTuple extends Tuple");
        return NULL;
    }
    Py_ssize_t v = slot_offset(plain, "values"), s = slot_offset(plain, "source");
    Py_ssize_t m = v < 0 || s < 0 ? -1 : slot_offset(tracked, "meta");
    Py_ssize_t a = m < 0 ? -1 : slot_offset(tracked, "ack_val");
    if (a < 0)
        return NULL;
    Py_XSETREF(t_plain, (PyTypeObject *)Py_NewRef(plain));
    Py_XSETREF(t_tracked, (PyTypeObject *)Py_NewRef(tracked));
    off_values = v, off_source = s, off_meta = m, off_ack_val = a;
    Py_RETURN_NONE;
}

static PyObject *
run_basic(PyObject *self, PyObject *args)
{
    PyObject *values, *metas, *source, *execute, *col, *anchored;
    PyObject *pending = Py_None, *stop = Py_None;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "O!OnOOOO!|OO:run_basic", &PyList_Type, &values, &metas,
                          &start, &source, &execute, &col, &PyList_Type, &anchored,
                          &pending, &stop))
        return NULL;
    if (pending != Py_None && !PyCallable_Check(stop)) {
        PyErr_SetString(PyExc_TypeError, "run_basic: stop must be callable with pending");
        return NULL;
    }
    /* a deque's length, read through its slot: what a row pays when nothing parks */
    lenfunc plen = NULL;
    PyTypeObject *ptype = Py_TYPE(pending);
    if (pending != Py_None && ptype->tp_as_sequence != NULL &&
        (ptype->tp_as_number == NULL || ptype->tp_as_number->nb_bool == NULL) &&
        (ptype->tp_as_mapping == NULL || ptype->tp_as_mapping->mp_length == NULL))
        plen = ptype->tp_as_sequence->sq_length;
    if (t_plain == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "run_basic: set_tuple_types was not called");
        return NULL;
    }
    if (metas != Py_None &&
        (!PyList_Check(metas) || PyList_GET_SIZE(metas) != PyList_GET_SIZE(values))) {
        PyErr_SetString(PyExc_ValueError, "run_basic: metas must be None or a list as long as values");
        return NULL;
    }
    /* `col.current = t` per tuple, as a store into the collector's __dict__ when its
    class has no descriptor of that name (setattr's generic path looks it up each time) */
    PyObject *cdict = NULL;
    if (col != Py_None && plain_current(col)) {
        cdict = PyObject_GenericGetDict(col, NULL);
        if (cdict == NULL)
            return NULL;
    }
    Py_INCREF(values);
    Py_XINCREF(metas);
    PyObject *out = NULL, *spare = NULL;
    /* the references a tuple nothing kept has between rows: this loop's and `current`'s */
    Py_ssize_t unkept = cdict != NULL ? 2 : col == Py_None ? 1 : 0;
    Py_ssize_t n = PyList_GET_SIZE(values);
    for (Py_ssize_t i = start < 0 ? 0 : start; i < n; i++) {
        if (PyList_GET_SIZE(values) != n ||
            (metas != Py_None && PyList_GET_SIZE(metas) != n)) {
            PyErr_SetString(PyExc_RuntimeError, "run_basic: the batch changed while it ran");
            goto done;
        }
        if (pending != Py_None) {  /* emits parked: this row waits, and the rest */
            Py_ssize_t parked = plen != NULL ? plen(pending) : PyObject_IsTrue(pending);
            if (parked < 0)
                goto done;
            if (parked) {
                PyObject *r = PyObject_CallNoArgs(stop);
                int stops = r == NULL ? -1 : PyObject_IsTrue(r);
                Py_XDECREF(r);
                if (stops < 0)
                    goto done;
                if (stops) {
                    out = PyLong_FromSsize_t(i);
                    goto done;
                }
            }
        }
        /* owned: m's __bool__ and execute are Python code, and m is used after execute */
        PyObject *v = Py_NewRef(PyList_GET_ITEM(values, i));
        PyObject *m = Py_NewRef(metas == Py_None ? Py_None : PyList_GET_ITEM(metas, i));
        int tracked = 0;
        if (m != Py_None && (tracked = PyObject_IsTrue(m)) < 0) {
            Py_DECREF(v);
            Py_DECREF(m);
            goto done;
        }
        PyTypeObject *tp = tracked ? t_tracked : t_plain;
        PyObject *t;
        /* the two references: this loop's and `current`'s, so `current` must still be
        it (an execute that kept its tuple and moved `current` on leaves two as well);
        looked up first, as a lookup may run Python code */
        int still_current = 1;
        if (spare != NULL && cdict != NULL) {
            PyObject *now = PyDict_GetItemWithError(cdict, s_current);
            if (now == NULL && PyErr_Occurred()) {
                Py_DECREF(v);
                Py_DECREF(m);
                goto done;
            }
            still_current = now == spare;
        }
        if (spare != NULL && still_current && Py_TYPE(spare) == tp &&
            Py_REFCNT(spare) == unkept) {
            t = spare;  /* the last row's tuple, nothing kept it: its slots rewritten */
            spare = NULL;
            /* all written before any old value is released: a finalizer that runs
            then sees this row's tuple whole */
            PyObject *old[4] = {SLOT(t, off_values), SLOT(t, off_source), NULL, NULL};
            SLOT(t, off_values) = v;
            SLOT(t, off_source) = Py_NewRef(source);
            if (tracked) {
                old[2] = SLOT(t, off_meta);
                old[3] = SLOT(t, off_ack_val);
                SLOT(t, off_meta) = Py_NewRef(m);
                SLOT(t, off_ack_val) = PyLong_FromLong(0);
            }
            for (int k = 0; k < 4; k++)
                Py_XDECREF(old[k]);
        }
        else {
            Py_CLEAR(spare);
            t = PyType_GenericAlloc(tp, 0);
            if (t == NULL) {
                Py_DECREF(v);
                Py_DECREF(m);
                goto done;
            }
            SLOT(t, off_values) = v;  /* v's reference moves into the slot */
            SLOT(t, off_source) = Py_NewRef(source);
            if (tracked) {
                SLOT(t, off_meta) = Py_NewRef(m);
                SLOT(t, off_ack_val) = PyLong_FromLong(0);
            }
        }
        if (cdict != NULL ? PyDict_SetItem(cdict, s_current, t) < 0
                          : col != Py_None && PyObject_SetAttr(col, s_current, t) < 0) {
            Py_DECREF(t);
            Py_DECREF(m);
            goto done;
        }
        PyObject *r = PyObject_CallOneArg(execute, t);
        if (r == NULL) {
            Py_DECREF(m);
            if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                Py_DECREF(t);
                goto done;
            }
            PyObject *type, *exc, *tb;
            PyErr_Fetch(&type, &exc, &tb);
            PyErr_NormalizeException(&type, &exc, &tb);
            if (tb != NULL)
                PyException_SetTraceback(exc, tb);
            Py_XDECREF(type);
            Py_XDECREF(tb);
            out = Py_BuildValue("(nNN)", i, t, exc);
            goto done;
        }
        Py_DECREF(r);
        if (tracked) {
            PyObject *val = SLOT(t, off_ack_val);
            Py_XINCREF(val);  /* its __bool__ may rewrite the slot */
            int nz = val == NULL ? 0 : PyObject_IsTrue(val);
            PyObject *pair = nz > 0 ? PyTuple_Pack(2, m, val) : NULL;
            Py_XDECREF(val);
            if (nz < 0 || (nz > 0 && (pair == NULL || PyList_Append(anchored, pair) < 0))) {
                Py_XDECREF(pair);
                Py_DECREF(t);
                Py_DECREF(m);
                goto done;
            }
            Py_XDECREF(pair);
        }
        Py_DECREF(m);
        if (unkept)
            spare = t;  /* our reference: the next row may take it */
        else
            Py_DECREF(t);
    }
    out = Py_NewRef(Py_None);
done:
    Py_XDECREF(spare);
    Py_DECREF(values);
    Py_XDECREF(metas);
    Py_XDECREF(cdict);
    return out;
}

/* ---- ack_run: the acker's ACK_ACK loop --------------------------------------------------

ack_run(values, start, cur, old, done) -> int: acker.AckerBolt.execute_raw's ACK_ACK loop
over values[start:] (each message (root, ack value)), for the messages that touch only
the current generation: an ack of an entry (XORed in; complete when it comes to 0 with
its spout task known and no fail), an announced ack (ack_folder.py: the spout's init
with it; a new entry, or complete at once, or an entry's init), an ack of a root with no
entry anywhere (a new entry, spout task unknown). A completed root joins done[task].
Stops at the first message it leaves to the Python loop and returns its index
(len(values) when none): a special message (a negative root), a root in the old
generation, an entry that failed, anything not (int, int) or not the ledger's shape.
Entries are the ledger's lists [xor, spout task or -1, failed]. */

static PyObject *s_low_mask;  /* LOW: (1 << 64) - 1 */
static PyObject *s_shift64;   /* 64 */

/* done.setdefault(task, []).append(root) */
static int
done_append(PyObject *done, PyObject *task, PyObject *root)
{
    PyObject *lst = PyDict_GetItemWithError(done, task);
    if (lst == NULL) {
        if (PyErr_Occurred())
            return -1;
        lst = PyList_New(0);
        if (lst == NULL)
            return -1;
        int rc = PyDict_SetItem(done, task, lst);
        Py_DECREF(lst);
        if (rc < 0)
            return -1;
        lst = PyDict_GetItemWithError(done, task);
        if (lst == NULL)
            return -1;
    }
    if (!PyList_Check(lst)) {
        PyErr_SetString(PyExc_TypeError, "ack_run: done's values are lists");
        return -1;
    }
    return PyList_Append(lst, root);
}

/* A new ledger entry [x, task, False] under root in cur. */
static int
new_entry(PyObject *cur, PyObject *root, PyObject *x, PyObject *task)
{
    PyObject *e = PyList_New(3);
    if (e == NULL)
        return -1;
    PyList_SET_ITEM(e, 0, Py_NewRef(x));
    PyList_SET_ITEM(e, 1, Py_NewRef(task));
    PyList_SET_ITEM(e, 2, Py_NewRef(Py_False));
    int rc = PyDict_SetItem(cur, root, e);
    Py_DECREF(e);
    return rc;
}

static PyObject *
ack_run(PyObject *self, PyObject *args)
{
    PyObject *values, *cur, *old, *done;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "O!nO!O!O!:ack_run", &PyList_Type, &values, &start,
                          &PyDict_Type, &cur, &PyDict_Type, &old, &PyDict_Type, &done))
        return NULL;
    PyObject *minus1 = PyLong_FromLong(-1);
    if (minus1 == NULL)
        return NULL;
    Py_INCREF(values);
    Py_ssize_t i = start < 0 ? 0 : start;
    /* held for the iteration: a key's __eq__ or a value's __del__ is Python code */
    PyObject *msg = NULL, *e = NULL, *hi = NULL, *low = NULL, *x = NULL;
    int err = 0;
    for (; i < PyList_GET_SIZE(values); i++) {
        Py_XSETREF(msg, Py_NewRef(PyList_GET_ITEM(values, i)));
        if (!PyTuple_CheckExact(msg) || PyTuple_GET_SIZE(msg) != 2)
            break;
        PyObject *root = PyTuple_GET_ITEM(msg, 0), *val = PyTuple_GET_ITEM(msg, 1);
        if (!PyLong_CheckExact(root) || !PyLong_CheckExact(val))
            break;
        int neg = PyObject_RichCompareBool(root, minus1, Py_LE);
        if (neg != 0) {
            err = neg < 0;
            break;  /* a special message (FIRST_DONE, COMMITTED_ACKS): Python's */
        }
        int announced = PyObject_RichCompareBool(val, s_low_mask, Py_GT);  /* val > LOW */
        if (announced < 0) {
            err = 1;
            break;
        }
        if (announced) {
            Py_XSETREF(hi, PyNumber_Rshift(val, s_shift64));  /* the spout task */
            if (hi == NULL) {
                err = 1;
                break;
            }
        }
        PyObject *got = PyDict_GetItemWithError(cur, root);
        if (got == NULL && PyErr_Occurred()) {
            err = 1;
            break;
        }
        Py_XINCREF(got);  /* owned before the last entry is released */
        Py_XSETREF(e, got);
        if (e == NULL) {
            int in_old = PyDict_Contains(old, root);
            if (in_old != 0) {
                err = in_old < 0;
                break;  /* the old generation: Python's (_entry moves it) */
            }
            if (!announced) {  /* no entry: one, its spout task not known yet */
                if (new_entry(cur, root, val, minus1) < 0) {
                    err = 1;
                    break;
                }
                continue;
            }
            Py_XSETREF(low, PyNumber_And(val, s_low_mask));
            if (low == NULL) {
                err = 1;
                break;
            }
            int nz = PyObject_IsTrue(low);
            if (nz < 0 || (nz ? new_entry(cur, root, low, hi) : done_append(done, hi, root)) < 0) {
                err = 1;
                break;
            }
            continue;
        }
        if (!PyList_CheckExact(e) || PyList_GET_SIZE(e) != 3 ||
            !PyLong_CheckExact(PyList_GET_ITEM(e, 0)) ||
            !PyLong_CheckExact(PyList_GET_ITEM(e, 1)) || PyList_GET_ITEM(e, 2) != Py_False)
            break;  /* failed, or not the ledger's shape: Python's */
        if (announced) {
            Py_XSETREF(low, PyNumber_And(val, s_low_mask));
            if (low == NULL) {
                err = 1;
                break;
            }
        }
        Py_XSETREF(x, PyNumber_Xor(PyList_GET_ITEM(e, 0), announced ? low : val));
        if (x == NULL) {
            err = 1;
            break;
        }
        PyList_SetItem(e, 0, Py_NewRef(x));
        if (announced)
            PyList_SetItem(e, 1, Py_NewRef(hi));
        int zero = PyObject_Not(x);
        if (zero < 0) {
            err = 1;
            break;
        }
        PyObject *task = PyList_GET_ITEM(e, 1);
        int known = PyObject_RichCompareBool(task, minus1, Py_GT);
        if (known < 0) {
            err = 1;
            break;
        }
        if (zero && known) {
            Py_INCREF(task);
            int rc = PyDict_DelItem(cur, root) < 0 || done_append(done, task, root) < 0;
            Py_DECREF(task);
            if (rc) {
                err = 1;
                break;
            }
        }
    }
    Py_XDECREF(msg);
    Py_XDECREF(e);
    Py_XDECREF(hi);
    Py_XDECREF(low);
    Py_XDECREF(x);
    Py_DECREF(values);
    Py_DECREF(minus1);
    if (err)
        return NULL;
    return PyLong_FromSsize_t(i);
}

/* ---- expand_roots --------------------------------------------------------------------

expand_roots(metas, announce) -> list or None: ack_folder.expand_roots: a copy of
`metas` with each root meta (an exact int) written out as ((root, announce),), or None
when there is none (the list is used as it is). For a consumer that does not take root
metas (ack_folder.py). */

static PyObject *
expand_roots(PyObject *self, PyObject *args)
{
    PyObject *metas, *announce;
    if (!PyArg_ParseTuple(args, "O!O!:expand_roots", &PyList_Type, &metas, &PyLong_Type,
                          &announce))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(metas), i = 0;
    while (i < n && !PyLong_CheckExact(PyList_GET_ITEM(metas, i)))
        i++;
    if (i == n)
        Py_RETURN_NONE;
    /* a copy, rewritten in place: an allocation may run a collection, and a finalizer
    could change `metas`, never this list */
    PyObject *out = PyList_GetSlice(metas, 0, n);
    if (out == NULL)
        return NULL;
    for (; i < PyList_GET_SIZE(out); i++) {
        PyObject *m = PyList_GET_ITEM(out, i);
        if (!PyLong_CheckExact(m))
            continue;
        PyObject *pair = PyTuple_Pack(2, m, announce), *x = NULL;
        if (pair != NULL) {
            x = PyTuple_Pack(1, pair);
            Py_DECREF(pair);
        }
        if (x == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SetItem(out, i, x);  /* steals x, releases the int */
    }
    return out;
}

/* ---- pop_many --------------------------------------------------------------------------

pop_many(head, roots) -> (entries, missing): head.pop(root, None) for each root, in
order (inflight.InFlight.pop_many's first pass), and how many were not there (their
entries are None: the caller looks in the older buckets). */

/* dict.pop(key, None) as one lookup (PyDict_GetItem then PyDict_DelItem is two) */
static PyObject *
dict_pop(PyObject *d, PyObject *key)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *v;
    if (PyDict_Pop(d, key, &v) < 0)
        return NULL;
    return v != NULL ? v : Py_NewRef(Py_None);
#else
    return _PyDict_Pop(d, key, Py_None);
#endif
}

static PyObject *
pop_many(PyObject *self, PyObject *args)
{
    PyObject *head, *roots;
    if (!PyArg_ParseTuple(args, "OO!:pop_many", &head, &PyList_Type, &roots))
        return NULL;
    int table = RootTable_Check(head);
    if (!table && !PyDict_Check(head)) {
        PyErr_SetString(PyExc_TypeError, "pop_many: head is a dict or a RootTable");
        return NULL;
    }
    Py_INCREF(roots);
    Py_ssize_t n = PyList_GET_SIZE(roots), missing = 0;
    PyObject *out = PyList_New(n);
    if (out == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < n; i++)  /* never NULL items where Python code may see it */
        PyList_SET_ITEM(out, i, Py_NewRef(Py_None));
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GET_SIZE(roots) != n) {
            PyErr_SetString(PyExc_RuntimeError, "pop_many: the roots changed");
            goto error;
        }
        PyObject *root = Py_NewRef(PyList_GET_ITEM(roots, i));  /* its __hash__/__eq__ run */
        PyObject *entry;
        if (table) {
            entry = roottable_pop((RootTable *)head, root);
            if (entry == NULL && !PyErr_Occurred())
                entry = Py_NewRef(Py_None);
        }
        else
            entry = dict_pop(head, root);  /* one lookup: found and deleted */
        Py_DECREF(root);
        if (entry == NULL)
            goto error;
        if (entry == Py_None)
            missing++;  /* absent, or stored as None: as Python's `None in found` */
        Py_SETREF(PyList_GET_ITEM(out, i), entry);
    }
    Py_DECREF(roots);
    return Py_BuildValue("(Nn)", out, missing);
error:
    Py_XDECREF(out);
    Py_DECREF(roots);
    return NULL;
}

static PyMethodDef methods[] = {
    {"set_tuple_types", set_tuple_types, METH_VARARGS,
     "set_tuple_types(Tuple, TrackedTuple): where run_basic writes a tuple's slots"},
    {"run_basic", run_basic, METH_VARARGS,
     "run_basic(values, metas, start, source, execute, col, anchored[, pending, stop]) -> None, "
     "the next row's index (stopped: emits parked) or (i, t, exc)"},
    {"pop_many", pop_many, METH_VARARGS,
     "pop_many(head, roots) -> (entries, missing): head.pop(root, None) for each root"},
    {"ack_run", ack_run, METH_VARARGS,
     "ack_run(values, start, cur, old, done) -> index of the first message left to Python"},
    {"expand_roots", expand_roots, METH_VARARGS,
     "expand_roots(metas, announce) -> the metas with root metas written out, or None"},
    {"fold_runs", fold_runs, METH_VARARGS,
     "fold_runs(metas, acks, announced, done, start) -> index of the first meta not folded"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "stormish._acking",
    "The per-tuple steps of XOR acking, compiled (optional).", -1, methods,
};

PyMODINIT_FUNC
PyInit__acking(void)
{
    if ((s_pick_next = PyUnicode_InternFromString("pick_next")) == NULL ||
        (s_metas = PyUnicode_InternFromString("metas")) == NULL ||
        (s_stream = PyUnicode_InternFromString("stream")) == NULL ||
        (s_anchors = PyUnicode_InternFromString("anchors")) == NULL ||
        (s_msg_id = PyUnicode_InternFromString("msg_id")) == NULL ||
        (s_current = PyUnicode_InternFromString("current")) == NULL ||
        (s_shift64 = PyLong_FromLong(64)) == NULL ||
        (s_low_mask = PyLong_FromString("ffffffffffffffff", NULL, 16)) == NULL)
        return NULL;
    if (PyType_Ready(&TreeEmitterType) < 0 || PyType_Ready(&AnchoredEmitterType) < 0 ||
        PyType_Ready(&RootTableType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "TreeEmitter", (PyObject *)&TreeEmitterType) < 0 ||
        PyModule_AddObjectRef(m, "AnchoredEmitter", (PyObject *)&AnchoredEmitterType) < 0 ||
        PyModule_AddObjectRef(m, "RootTable", (PyObject *)&RootTableType) < 0 ||
        /* root metas (ack_folder.py): TreeEmitter's `compact`, expand_roots */
        PyModule_AddIntConstant(m, "ROOT_METAS", 1) < 0 ||
        PyModule_AddIntConstant(m, "RUN_STOPS", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
