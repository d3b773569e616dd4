/* The compiled callables' shared GC plumbing (stormish/_speedups.c, stormish/_acking.c).

Each such type declares its object references one after another, so that one traverse,
one clear and one dealloc serve them all: they walk the references from the first to
the last by offset. A type names its range once (REFS(type, first, last)). */
#ifndef STORMISH_REFS_H
#define STORMISH_REFS_H

#include <Python.h>
#include <stddef.h>

#define REFS(type, first, last) offsetof(type, first), offsetof(type, last)
#define REF_AT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static inline int
refs_traverse(PyObject *self, size_t first, size_t last, visitproc visit, void *arg)
{
    for (size_t off = first; off <= last; off += sizeof(PyObject *))
        Py_VISIT(REF_AT(self, off));
    return 0;
}

static inline int
refs_clear(PyObject *self, size_t first, size_t last)
{
    for (size_t off = first; off <= last; off += sizeof(PyObject *))
        Py_CLEAR(REF_AT(self, off));
    return 0;
}

static inline void
refs_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_TYPE(self)->tp_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* name_traverse and name_clear of a type whose references run from `first` to `last` */
#define REFS_GC(name, type, first, last)                                      \
    static int name##_traverse(PyObject *e, visitproc visit, void *arg)       \
    {                                                                         \
        return refs_traverse(e, REFS(type, first, last), visit, arg);         \
    }                                                                         \
    static int name##_clear(PyObject *e) { return refs_clear(e, REFS(type, first, last)); }

/* tp_call of a vectorcall type: the vectorcall itself */
static inline PyObject *
refs_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return PyVectorcall_Call(self, args, kwargs);
}

#endif
