/* Reuse of CPython's freed frame-stack chunks.
 *
 * CPython 3.11+ keeps frames on a per-thread stack of chunks (16 KiB and up)
 * taken from the object arena allocator, and frees a chunk as soon as the
 * frame at its start returns. A recursion that goes back and forth over a
 * chunk's edge (the validator on a deep payload, at some depths of the
 * caller's stack) then maps and unmaps memory on every crossing: a
 * validation took from 1 s to 9 s by the depth it was called from. Every
 * gevent greenlet also takes and frees a chunk of its own.
 *
 * install() wraps the arena allocator the interpreter has: freed blocks of
 * chunk size are kept (a few, per process) and handed back to the next
 * request of the same size; everything else, and every block past the
 * spares, goes to the wrapped allocator, which also frees what it made
 * before the wrapper was installed. Object arenas (1 MiB) are never kept.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>

/* Largest block kept: frame chunks (16 KiB, doubled for a huge frame);
   well below an object arena. */
#define KEPT_MAX_BYTES (64 * 1024)
#define SPARES 16

typedef struct {
    void *ptr;
    size_t size;
} Block;

static PyObjectArenaAllocator wrapped;
static int installed;
/* Arena calls normally hold the GIL; the lock keeps the list sound if one
   ever does not (a thread state freed without it). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Block spares[SPARES];
static int nspares;
static unsigned long long reused;

static void *
chunk_alloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size <= KEPT_MAX_BYTES) {
        pthread_mutex_lock(&lock);
        for (int i = nspares - 1; i >= 0; i--) {
            if (spares[i].size == size) {
                void *ptr = spares[i].ptr;
                spares[i] = spares[--nspares];
                reused++;
                pthread_mutex_unlock(&lock);
                return ptr;
            }
        }
        pthread_mutex_unlock(&lock);
    }
    return wrapped.alloc(wrapped.ctx, size);
}

static void
chunk_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (size <= KEPT_MAX_BYTES) {
        pthread_mutex_lock(&lock);
        if (nspares < SPARES) {
            spares[nspares].ptr = ptr;
            spares[nspares].size = size;
            nspares++;
            pthread_mutex_unlock(&lock);
            return;
        }
        pthread_mutex_unlock(&lock);
    }
    wrapped.free(wrapped.ctx, ptr, size);
}

static PyObject *
install(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    if (!installed) {
        PyObjectArenaAllocator ours = {NULL, chunk_alloc, chunk_free};
        PyObject_GetArenaAllocator(&wrapped);
        PyObject_SetArenaAllocator(&ours);
        installed = 1;
    }
    Py_RETURN_NONE;
}

static PyObject *
stats(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    pthread_mutex_lock(&lock);
    int kept = nspares;
    unsigned long long count = reused;
    pthread_mutex_unlock(&lock);
    return Py_BuildValue("{s:O,s:i,s:K}", "installed", installed ? Py_True : Py_False,
                         "spares", kept, "reused", count);
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS,
     "Keep freed frame-stack chunks for reuse, for the whole process (idempotent)."},
    {"stats", stats, METH_NOARGS,
     "{'installed': bool, 'spares': chunks kept now, 'reused': chunks handed back}"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "narad._datastack",
    .m_doc = "Reuse of CPython's freed frame-stack chunks (see _datastack.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__datastack(void)
{
    return PyModule_Create(&module);
}
