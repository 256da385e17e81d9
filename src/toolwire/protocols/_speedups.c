/* Compiled helpers for the whole-text fast paths (optional: each has a pure-Python
 * twin that runs when this module was not built, and tests hold the two equal).
 *
 * read_slot_tags(text, nonce) reads a reply made only of seed 001's canonical tags
 * of one nonce, with any text without "<" around them:
 *
 *   <NONCE-DDDD tool="T">{...}</NONCE-DDDD>              a call (content starts with "{")
 *   <NONCE-FINAL status="S" format="F">...</NONCE-FINAL>  at most one final report
 *
 * T, S and F are one or more characters other than '"', '<', '>' and white space
 * (str.isspace); contents hold no "<". It returns
 *
 *   (slots, tools, contents, final, colons)
 *
 * slots, tools and contents are lists (one entry per call, in text order), final is
 * None or (status, format, content), and colons counts the ":" outside JSON strings
 * in the contents (in valid JSON: one per key-value pair). It returns None for
 * anything else, and for a content holding a run of 19 or more digits (orjson, the
 * decoder after it, turns integers beyond 64 bits into floats). None means "not for
 * the fast path": the caller takes the exact path, which also says what is wrong.
 * Nothing is judged here (statuses, formats, tools, slots, JSON): only read. The text
 * is untrusted: every index is checked against its length before a read.
 *
 * Maker(cls, members) builds instances of a slotted class whose fields are the
 * member descriptors `members`, in that order: Maker(cls, members)(*values) is
 * object.__new__(cls) and then members[i].__set__(obj, values[i]), the way
 * toolwire.protocols._bulk builds frozen dataclasses without running __init__.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

/* ---- read_slot_tags ------------------------------------------------------------ */

typedef struct {
    const void *data;
    Py_ssize_t len;
} Text;

/* Every helper takes the text's kind as a constant and is inlined into one reader per
 * kind, so PyUnicode_READ's switch on the kind folds away. */
#define AT(kind, t, i) PyUnicode_READ((kind), (t)->data, (i))

/* Does text[at:] start with the n ASCII bytes s? */
static inline Py_ALWAYS_INLINE int
starts_with(int kind, const Text *t, Py_ssize_t at, const char *s, Py_ssize_t n)
{
    if (n > t->len - at)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (AT(kind, t, at + i) != (Py_UCS4)(unsigned char)s[i])
            return 0;
    }
    return 1;
}

/* Does text[at:] start with text[from:from + n]? (from + n <= at) */
static inline Py_ALWAYS_INLINE int
repeats(int kind, const Text *t, Py_ssize_t at, Py_ssize_t from, Py_ssize_t n)
{
    if (n > t->len - at)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (AT(kind, t, at + i) != AT(kind, t, from + i))
            return 0;
    }
    return 1;
}

/* The index of the next "<" at or after `at`, or the text's length. */
static inline Py_ALWAYS_INLINE Py_ssize_t
next_lt(int kind, const Text *t, Py_ssize_t at)
{
    if (kind == PyUnicode_1BYTE_KIND && at < t->len) {
        const char *start = (const char *)t->data;
        const char *hit = memchr(start + at, '<', (size_t)(t->len - at));
        return hit ? hit - start : t->len;
    }
    while (at < t->len && AT(kind, t, at) != '<')
        at++;
    return at;
}

/* The end of an attribute value starting at `at` (one or more characters, none of
 * '"', '<', '>' or white space, then '"'), or -1. */
static inline Py_ALWAYS_INLINE Py_ssize_t
attribute_end(int kind, const Text *t, Py_ssize_t at)
{
    Py_ssize_t i = at;
    for (; i < t->len; i++) {
        Py_UCS4 c = AT(kind, t, i);
        if (c == '"')
            break;
        if (c == '<' || c == '>' || Py_UNICODE_ISSPACE(c))
            return -1;
    }
    return (i > at && i < t->len) ? i : -1;
}

/* The end of a call's content starting at `at` (the next "<" or the text's end),
 * adding the ":" outside JSON strings to *colons; -1 at a run of 19 digits. */
static inline Py_ALWAYS_INLINE Py_ssize_t
call_content_end(int kind, const Text *t, Py_ssize_t at, Py_ssize_t *colons)
{
    int in_string = 0, escaped = 0;
    Py_ssize_t digits = 0, i = at;
    for (; i < t->len; i++) {
        Py_UCS4 c = AT(kind, t, i);
        if (c == '<')
            break;
        if (c >= '0' && c <= '9') {
            if (++digits >= 19)
                return -1;
        }
        else {
            digits = 0;
        }
        if (in_string) {
            if (escaped)
                escaped = 0;
            else if (c == '\\')
                escaped = 1;
            else if (c == '"')
                in_string = 0;
        }
        else if (c == '"') {
            in_string = 1;
        }
        else if (c == ':') {
            (*colons)++;
        }
    }
    return i;
}

static int
append_slice(PyObject *list, PyObject *text, Py_ssize_t start, Py_ssize_t end)
{
    PyObject *s = PyUnicode_Substring(text, start, end);
    if (s == NULL)
        return -1;
    int rc = PyList_Append(list, s);
    Py_DECREF(s);
    return rc;
}

/* 1 read, 0 not for the fast path, -1 error (a Python exception is set). */
static inline Py_ALWAYS_INLINE int
read_tags(int kind, PyObject *text, const char *nonce, Py_ssize_t m, PyObject *slots,
          PyObject *tools, PyObject *contents, PyObject **final, Py_ssize_t *colons)
{
    const Text tx = {PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)}, *t = &tx;
    Py_ssize_t pos = 0;
    for (;;) {
        Py_ssize_t lt = next_lt(kind, t, pos);
        if (lt >= t->len)
            return 1;
        Py_ssize_t p = lt + 1; /* "<" NONCE "-" */
        if (!starts_with(kind, t, p, nonce, m) || !starts_with(kind, t, p + m, "-", 1))
            return 0;
        p += m + 1;
        if (starts_with(kind, t, p, "FINAL status=\"", 14)) {
            if (*final != NULL)
                return 0; /* a second final report */
            Py_ssize_t s0 = p + 14, s1 = attribute_end(kind, t, s0);
            if (s1 < 0 || !starts_with(kind, t, s1, "\" format=\"", 10))
                return 0;
            Py_ssize_t f0 = s1 + 10, f1 = attribute_end(kind, t, f0);
            if (f1 < 0 || !starts_with(kind, t, f1, "\">", 2))
                return 0;
            Py_ssize_t c0 = f1 + 2, c1 = next_lt(kind, t, c0);
            if (!starts_with(kind, t, c1, "</", 2) || !starts_with(kind, t, c1 + 2, nonce, m) ||
                !starts_with(kind, t, c1 + 2 + m, "-FINAL>", 7))
                return 0;
            PyObject *status = PyUnicode_Substring(text, s0, s1);
            PyObject *format = PyUnicode_Substring(text, f0, f1);
            PyObject *content = PyUnicode_Substring(text, c0, c1);
            if (status != NULL && format != NULL && content != NULL)
                *final = PyTuple_Pack(3, status, format, content);
            Py_XDECREF(status);
            Py_XDECREF(format);
            Py_XDECREF(content);
            if (*final == NULL)
                return -1;
            pos = c1 + 2 + m + 7;
            continue;
        }
        for (Py_ssize_t d = 0; d < 4; d++) { /* DDDD */
            if (p + d >= t->len || AT(kind, t, p + d) < '0' || AT(kind, t, p + d) > '9')
                return 0;
        }
        Py_ssize_t name_end = p + 4; /* the slot is text[lt + 1:name_end] */
        if (!starts_with(kind, t, name_end, " tool=\"", 7))
            return 0;
        Py_ssize_t a0 = name_end + 7, a1 = attribute_end(kind, t, a0);
        if (a1 < 0 || !starts_with(kind, t, a1, "\">{", 3))
            return 0;
        Py_ssize_t c0 = a1 + 2, c1 = call_content_end(kind, t, c0, colons);
        if (c1 < 0)
            return 0;
        Py_ssize_t slot_len = name_end - (lt + 1); /* "</" NONCE "-" DDDD ">" */
        if (!starts_with(kind, t, c1, "</", 2) || !repeats(kind, t, c1 + 2, lt + 1, slot_len) ||
            !starts_with(kind, t, c1 + 2 + slot_len, ">", 1))
            return 0;
        if (append_slice(slots, text, lt + 1, name_end) < 0 ||
            append_slice(tools, text, a0, a1) < 0 || append_slice(contents, text, c0, c1) < 0)
            return -1;
        pos = c1 + 3 + slot_len;
    }
}

static PyObject *
read_slot_tags(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "read_slot_tags(text: str, nonce: str)");
        return NULL;
    }
    PyObject *text = args[0];
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) /* a string made by the old wchar_t API */
        return NULL;
#endif
    Py_ssize_t m;
    const char *nonce = PyUnicode_AsUTF8AndSize(args[1], &m);
    if (nonce == NULL)
        return NULL;
    if (!PyUnicode_IS_ASCII(args[1]) || m == 0) {
        PyErr_SetString(PyExc_ValueError, "the nonce is ASCII and not empty");
        return NULL;
    }
    PyObject *slots = PyList_New(0), *tools = PyList_New(0), *contents = PyList_New(0);
    PyObject *final = NULL, *result = NULL, *count = NULL;
    Py_ssize_t colons = 0;
    int rc = -1;
    if (slots != NULL && tools != NULL && contents != NULL) {
        switch (PyUnicode_KIND(text)) {
        case PyUnicode_1BYTE_KIND:
            rc = read_tags(PyUnicode_1BYTE_KIND, text, nonce, m, slots, tools, contents, &final,
                           &colons);
            break;
        case PyUnicode_2BYTE_KIND:
            rc = read_tags(PyUnicode_2BYTE_KIND, text, nonce, m, slots, tools, contents, &final,
                           &colons);
            break;
        default:
            rc = read_tags(PyUnicode_4BYTE_KIND, text, nonce, m, slots, tools, contents, &final,
                           &colons);
        }
    }
    if (rc == 0) {
        result = Py_NewRef(Py_None);
    }
    else if (rc == 1 && (count = PyLong_FromSsize_t(colons)) != NULL) {
        result = PyTuple_Pack(5, slots, tools, contents, final ? final : Py_None, count);
    }
    Py_XDECREF(count);
    Py_XDECREF(slots);
    Py_XDECREF(tools);
    Py_XDECREF(contents);
    Py_XDECREF(final);
    return result;
}

/* ---- Maker --------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    PyObject *members; /* a tuple of descriptors with a __set__ */
    vectorcallfunc vectorcall;
} Maker;

static PyObject *
maker_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Maker *mk = (Maker *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf), fields = PyTuple_GET_SIZE(mk->members);
    if (n != fields || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "%s maker takes %zd positional arguments, got %zd",
                     mk->cls->tp_name, fields, n);
        return NULL;
    }
    PyObject *obj = mk->cls->tp_alloc(mk->cls, 0);
    if (obj == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *member = PyTuple_GET_ITEM(mk->members, i);
        if (Py_TYPE(member)->tp_descr_set(member, obj, args[i]) < 0) {
            Py_DECREF(obj);
            return NULL;
        }
    }
    return obj;
}

static PyObject *
maker_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *cls, *members;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "Maker(cls, members) takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!:Maker", &PyType_Type, &cls, &PyTuple_Type, &members))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(members); i++) {
        if (Py_TYPE(PyTuple_GET_ITEM(members, i))->tp_descr_set == NULL) {
            PyErr_SetString(PyExc_TypeError, "every member must be a data descriptor");
            return NULL;
        }
    }
    if (((PyTypeObject *)cls)->tp_alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "the class cannot be allocated");
        return NULL;
    }
    Maker *mk = (Maker *)type->tp_alloc(type, 0);
    if (mk == NULL)
        return NULL;
    mk->cls = (PyTypeObject *)Py_NewRef(cls);
    mk->members = Py_NewRef(members);
    mk->vectorcall = maker_call;
    return (PyObject *)mk;
}

static int
maker_traverse(Maker *mk, visitproc visit, void *arg)
{
    Py_VISIT(mk->cls);
    Py_VISIT(mk->members);
    return 0;
}

static int
maker_clear(Maker *mk)
{
    Py_CLEAR(mk->cls);
    Py_CLEAR(mk->members);
    return 0;
}

static void
maker_dealloc(Maker *mk)
{
    PyObject_GC_UnTrack(mk);
    maker_clear(mk);
    Py_TYPE(mk)->tp_free((PyObject *)mk);
}

static PyTypeObject MakerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "toolwire.protocols._speedups.Maker",
    .tp_basicsize = sizeof(Maker),
    .tp_dealloc = (destructor)maker_dealloc,
    .tp_vectorcall_offset = offsetof(Maker, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Maker(cls, members)(*values): cls's instance with members set to values.",
    .tp_traverse = (traverseproc)maker_traverse,
    .tp_clear = (inquiry)maker_clear,
    .tp_new = maker_new,
};

/* ---- module -------------------------------------------------------------------- */

static PyMethodDef speedups_methods[] = {
    {"read_slot_tags", (PyCFunction)(void (*)(void))read_slot_tags, METH_FASTCALL,
     "read_slot_tags(text, nonce) -> (slots, tools, contents, final, colons) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "_speedups", "Compiled helpers for the whole-text fast paths.", -1,
    speedups_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&MakerType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "Maker", (PyObject *)&MakerType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
