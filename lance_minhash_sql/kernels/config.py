"""Numba flags in one place, and a log of the kernels numba compiles.

``nogil`` kernels release the GIL so DuckDB's threads run them concurrently; ``cache``
keeps compiled machine code on disk between processes. Set
``LANCE_MINHASH_NUMBA_CACHE=0`` to disable the on-disk cache.

Numba compiles a kernel on its first call with a new combination of argument types, and
with ``cache=True`` writes the machine code beside the package's sources (in
``__pycache__``), or under ``NUMBA_CACHE_DIR`` when that is set, or in the user's cache
folder when the package folder is read-only. Later processes load it from there. So the
rules that keep compilation short are about argument types: every array a kernel gets
has one dtype and one writability (Arrow buffers are read-only, so text buffers are
always passed read-only), and no kernel is called from another with a literal constant
argument (numba compiles a separate specialization for ``f(x, 0)``; pass
``np.int64(0)``).

What compiles, and how often, is the rest of the cost. Every jitted function a kernel
calls compiles on its own (typing, LLVM optimization, machine code, a cache entry) and
then again inside its caller, so per-query bodies and helpers called from one place are
``inline="always"`` (compiled once, inside the driver), and a wrapper that only
allocates and calls one kernel stays plain Python. The converse holds for a tiny helper
called from many places (``xxh64``'s rounds): numba types an inlined body again at every
call site, so it stays a function of its own, which LLVM inlines anyway. Inlining a large
function into several kernels costs more than compiling it once (``tokenize_doc``). Copying between arrays is a loop, not
slice assignment (``a[:n] = b[:n]`` pulls in numba's broadcasting code: seconds on a
fresh install). Each numpy constructor (``np.empty``, ``np.zeros``, ``np.full``,
``np.arange``) compiles once per dtype and dimension, so kernels share a few.

**numba itself loads on the first kernel call, not on import.** Importing numba, and
setting up its compiler (its implementation registries, and scipy's BLAS bindings when
scipy is installed), cost a new process more CPU than signing a few thousand rows, even
when every kernel then comes from the cache. Kernels are declared with this module's
:func:`njit` and ``prange``: until some kernel is called they are :class:`Kernel`
placeholders, so the package's modules import without numba, and a path that calls no
kernel (a single search, see ``query/probe.py``; a small build, ``index/numpy_sign.py``)
never loads it. The first call of any kernel loads numba once (:func:`load_numba`, the
garbage collector paused meanwhile: :data:`COLLECTOR_PAUSE`); each kernel becomes numba's
own dispatcher when first called (:func:`dispatcher_of`), in the namespace of each of the
package's modules that declared or imported it, and every kernel does when a compilation
starts, so kernels calling kernels are typed by numba as usual; a Python caller holding a
placeholder is forwarded to the dispatcher, and numba code elsewhere that calls one (a
test's own kernel) types it as that dispatcher (numba asks the placeholder for
``_numba_type_``, which makes it). A process that loads every kernel from the cache never
sets up the compiler: loads skip numba's registry refresh (:func:`_cache_loads_without_refresh`),
and the array implementations are imported, without the BLAS probe
(:func:`_set_up_without_blas_probe`), when a compilation starts (:class:`_CompileSetUp`).

:data:`COMPILES` listens to numba's ``numba:compile`` events (fired for real
compilations only, never for cache loads) for this package's kernels: how many, how
long, which. The first compilation in a process prints one line on stderr saying what
is happening and that it happens once (``LANCE_MINHASH_COMPILE_NOTICE=0`` silences it);
while any compilation runs, a terminal shows a status line with its seconds
(``core/status.py``: a compile wait is never silent), under the same switch.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import types

from lance_minhash_sql.core.status import StatusLine, on_terminal

CACHE = os.environ.get("LANCE_MINHASH_NUMBA_CACHE", "1") != "0"
JIT = types.MappingProxyType(dict(nogil=True, cache=CACHE))
JIT_PARALLEL = types.MappingProxyType(dict(nogil=True, cache=CACHE, parallel=True))

_PACKAGE = __name__.split(".")[0]
# what the first compilation of a kernel of the package in this process calls with the
# kernel's name, true if it started a helper process compiling ahead: the kernels start no
# process; runtime/compile_ahead.py installs its start_helper here (on_first_compile)
FIRST_COMPILE: list = []

_LOCK = threading.RLock()
DECLARED_KERNELS: list["Kernel"] = []  # declared before numba was loaded, in order, until each has its dispatcher
_numba = None  # the numba module, once load_numba() has run


class _Prange:
    """``prange`` before numba is loaded (numba's own ``prange`` replaces it on load)."""

    def __call__(self, *args):
        return range(*args)


prange = _Prange()


class Kernel:
    """A kernel declared here (:func:`njit`, or :func:`intrinsic` before numba is loaded)
    until its dispatcher is made: its Python function and numba flags.
    Calling it (or asking numba's dispatcher for an attribute, such as ``signatures``)
    makes its dispatcher first (:func:`dispatcher_of`), loading numba if need be."""

    def __init__(self, py_func, flags: dict):
        self.py_func = py_func
        self.flags = flags
        self.dispatcher = None
        # (namespace, name) of the package's modules holding this placeholder at numba's
        # load: each gets the dispatcher when it is made
        self.holders: list = []
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__module__ = py_func.__module__
        self.__doc__ = py_func.__doc__

    def __call__(self, *args):
        d = self.dispatcher
        if d is None:
            d = dispatcher_of(self)
        return d(*args)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(dispatcher_of(self), name)

    def __repr__(self) -> str:
        return f"<kernel {self.__module__}.{self.__qualname__}>"


def dispatcher_of(kernel):
    """numba's dispatcher of ``kernel`` (a placeholder, or already a dispatcher), made on
    first need: numba loaded (:func:`load_numba`), the dispatcher made, and put in place of
    the placeholder in the module that declared it and the package's modules that held it
    at the load (a module imported later keeps the placeholder, which forwards)."""
    if not isinstance(kernel, Kernel):
        return kernel
    with _LOCK:
        if kernel.dispatcher is None:
            numba = load_numba()
            if kernel.flags is None:
                from numba.core.extending import intrinsic as numba_intrinsic

                made = numba_intrinsic(kernel.py_func)
            else:
                made = numba.njit(**kernel.flags)(kernel.py_func)
            declaring = getattr(sys.modules.get(kernel.__module__), "__dict__", None) or {}
            holders = kernel.holders + [(declaring, name) for name, value in list(declaring.items()) if value is kernel]
            for namespace, name in holders:
                if namespace.get(name) is kernel:
                    namespace[name] = made
            kernel.holders = []
            kernel.dispatcher = made
            DECLARED_KERNELS.remove(kernel)
        return kernel.dispatcher


def njit(**flags):
    """``numba.njit(**flags)``, deferred until the kernel is first called or a compilation
    starts (see the module doc)."""

    def declare(func):
        with _LOCK:
            kernel = Kernel(func, flags)
            DECLARED_KERNELS.append(kernel)
            return kernel

    return declare


def intrinsic(func):
    """``numba.extending.intrinsic(func)`` (code written as LLVM IR), deferred like
    :func:`njit`: ``func`` is numba's typer, which returns ``(signature, codegen)``."""
    with _LOCK:
        if _numba is not None:
            from numba.core.extending import intrinsic as numba_intrinsic
            return numba_intrinsic(func)
        kernel = Kernel(func, None)  # no flags: an intrinsic
        DECLARED_KERNELS.append(kernel)
        return kernel


def on_first_compile(hook) -> None:
    """Make ``hook(name)`` what the first compilation in this process calls (see
    :data:`FIRST_COMPILE`)."""
    FIRST_COMPILE[:] = [hook]


def numba_loaded() -> bool:
    """True once some kernel has run (or :func:`load_numba` was called) in this process."""
    return _numba is not None


def load_numba():
    """Import numba (once) and put numba's ``prange`` in place of the placeholder in the
    package's modules; returns the numba module.

    A declared kernel's dispatcher is made when the kernel is first called or asked for one
    (:func:`dispatcher_of`): a process that loads its kernels from the cache makes the few
    its calls use, not every kernel the package declares (each one made is a cache locator
    and its folder). Intrinsics are made here (numba types them by identity), and every
    kernel still without a dispatcher is made when a compilation starts
    (:class:`_CompileSetUp`), so the compiler sees dispatchers in every module, as numba's
    own decorator would have left them."""
    global _numba, prange
    with _LOCK:
        if _numba is not None:
            return _numba
        with COLLECTOR_PAUSE:
            import numba
            from numba.core import event

            _cache_loads_without_refresh()

            event.Listener.register(CompileLog)
            event.register("numba:compile", COMPILES)
            event.Listener.register(_CompileSetUp)
            event.register("numba:compile", _CompileSetUp())

            declared = set(DECLARED_KERNELS)
            modules = {k.py_func.__module__ for k in DECLARED_KERNELS}
            modules.update(name for name in sys.modules if name.startswith(_PACKAGE + "."))
            for name in modules:
                namespace = getattr(sys.modules.get(name), "__dict__", None) or {}
                for attr, value in list(namespace.items()):
                    if isinstance(value, Kernel) and value in declared:
                        value.holders.append((namespace, attr))
                    elif isinstance(value, _Prange):
                        namespace[attr] = numba.prange
            prange = numba.prange
            _numba = numba
            for kernel in [k for k in DECLARED_KERNELS if k.flags is None]:
                dispatcher_of(kernel)
        return numba


def _make_every_dispatcher() -> None:
    """Make the dispatcher of every declared kernel that has none yet."""
    with _LOCK:
        for kernel in list(DECLARED_KERNELS):
            dispatcher_of(kernel)


class _CollectorPause:
    """Python's cyclic garbage collector off while a ``with`` block runs (back on after the
    last of the threads running such a block leaves it, if it was on when the first came in).

    numba's import and set-up create objects by the hundred thousand that live as long as
    the process, none of them garbage; with the collector on, its allocation counts start
    a collection every few hundred objects, each walking the youngest generations and
    some all objects made so far. Nothing is lost by pausing: the next collection after the
    block finds whatever garbage the block left."""

    def __init__(self):
        self._lock = threading.Lock()
        self._inside = 0  # threads inside a block
        self._was_on = False  # the collector's state when the first came in

    def __enter__(self):
        with self._lock:
            if self._inside == 0:
                self._was_on = gc.isenabled()
                gc.disable()
            self._inside += 1
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._was_on:
                gc.enable()


COLLECTOR_PAUSE = _CollectorPause()


class _CompileSetUp:
    """A ``numba:compile`` listener: when a compilation starts, before the compiler
    refreshes numba's registries (which imports its array implementations), the array
    implementations are imported without numba's BLAS probe
    (:func:`_set_up_without_blas_probe`) and every declared kernel gets its dispatcher
    (:func:`_make_every_dispatcher`). A process that only loads kernels from the cache
    does neither."""

    def notify(self, ev) -> None:
        if ev.is_start:
            _set_up_without_blas_probe()
            if DECLARED_KERNELS:
                _make_every_dispatcher()


def _cache_loads_without_refresh() -> None:
    """numba's cache loads without its registries' set-up.

    Before each load from the on-disk cache numba refreshes its typing and lowering
    registries (``numba/core/caching.py: Cache.load_overload`` calls the target context's
    ``refresh()``): the first refresh imports and installs every implementation numba has.
    Rebuilding cached machine code needs none of them, only numba's
    runtime (NRT) compiled and its symbols known; a compilation refreshes the registries
    itself before it types anything (``numba/core/compiler.py: CompilerBase.__init__``).
    So the load initializes the runtime and reads the cache, as numba's own method does
    after its refresh. Left as numba has it when its private layout differs."""
    from numba.core import caching
    from numba.core.runtime import rtsys

    cls = caching.Cache
    if not all(hasattr(cls, name) for name in ("load_overload", "_load_overload",
                                               "_guard_against_spurious_io_errors")):
        return

    def load_overload(self, sig, target_context):
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    load_overload.__doc__ = cls.load_overload.__doc__
    cls.load_overload = load_overload


def _set_up_without_blas_probe() -> None:
    """Import numba's array implementations without its BLAS probe.

    At set-up numba imports ``scipy.linalg`` (its BLAS bindings) once, only to decide
    whether ``np.correlate`` and ``np.convolve`` compiled later take BLAS's dot product
    (``numba/np/arraymath.py: _HAVE_BLAS``); that import is most of the probe's cost and
    no kernel here uses linear algebra. So the module is imported with the probe answering
    "not yet", and the flag is then set to whether scipy is installed, which is what the
    probe finds where numba's own BLAS check passes (``import numba`` has imported scipy
    when it is installed); numba's linear algebra imports ``scipy.linalg`` itself when
    first compiled, as it always does. Done only when numba's set-up has not run yet
    (nothing to save otherwise)."""
    if "numba.np.arraymath" in sys.modules:
        return
    import numba.np.linalg as linalg

    probe = linalg.ensure_blas

    def not_yet():
        raise ImportError("numba's BLAS probe is deferred to the first linear algebra")

    linalg.ensure_blas = not_yet
    try:
        import numba.np.arraymath as arraymath
    finally:
        linalg.ensure_blas = probe
    arraymath.ensure_blas = probe
    arraymath._HAVE_BLAS = "scipy" in sys.modules


def dispatchers_by_name(modules) -> dict:
    """``{module.function: dispatcher}`` of the kernels declared in ``modules`` (names of
    the package's ``kernels`` modules; others are not imported), numba loaded."""
    found = {}
    for name in sorted(modules):
        if not name.startswith(_PACKAGE + ".kernels."):
            continue
        try:
            __import__(name)
        except ImportError:  # a module the plan names that no longer exists
            continue
    load_numba()
    from numba.core.registry import CPUDispatcher

    for name in sorted(modules):
        for value in list(vars(sys.modules.get(name, types.ModuleType(name))).values()):
            if isinstance(value, Kernel) and value.flags is not None:
                value = dispatcher_of(value)
            func = getattr(value, "py_func", None)
            if isinstance(value, CPUDispatcher) and func.__module__ == name:
                found[f"{name}.{func.__name__}"] = value
    return found


def in_cache(kernel) -> bool:
    """Whether numba's on-disk cache holds machine code of ``kernel`` (a placeholder or a
    dispatcher) for this machine and this source, for some argument types: then its first
    call loads rather than compiles. Loads numba. Reads the kernel's cache index, which is
    numba's own layout: False when that layout is not the one this reads, or the cache is off."""
    if not CACHE:
        return False
    dispatcher = dispatcher_of(kernel)
    try:
        index = dispatcher._cache._cache_file._load_index()  # {} when missing or stale
        magic = dispatcher.targetctx.codegen().magic_tuple()
    except AttributeError:
        return False
    return any(isinstance(key, tuple) and len(key) > 1 and key[1] == magic for key in index)


COMPILE_NOTICE = ("lance-minhash: compiling the numba kernels for this machine: the first call of each operation "
                  "takes a few seconds longer (a signature, a build, a search and a self-join together: about "
                  "5-10 s on a quiet 2-core machine{helper}; several times that under load), once: later runs "
                  "load them from numba's cache{where}; `lance-minhash warmup` compiles them all ahead of time)")


COMPILING = "compiling numba kernels for this machine (once; later runs load them from numba's cache)"

HELPER_NOTE = ", a second process compiling the next calls' kernels meanwhile on an idle core"


def compiled_note(seconds: float) -> str:
    """`` (including N s compiling numba kernels, once per machine)`` for a timing line
    whose work compiled for ``seconds``; empty when it compiled nothing to speak of."""
    return f" (including {seconds:.1f}s compiling numba kernels, once per machine)" if seconds >= 0.05 else ""


def jit_twins(body):
    """``(parallel, serial)`` kernels from one Python body whose outer loop is a ``prange``:
    compiled with ``parallel=True``, and as plain loops on the calling thread (without
    ``parallel`` numba runs ``prange`` as ``range``), for work too small to pay for a
    parallel launch. Each twin is its own function, ``<body>_parallel`` and
    ``<body>_serial``, so the on-disk cache keeps both (it keys entries by name); each
    compiles only when first called."""

    def twin(suffix: str):
        f = types.FunctionType(body.__code__, body.__globals__, body.__name__ + suffix, body.__defaults__,
                               body.__closure__)
        f.__qualname__ = body.__qualname__ + suffix
        f.__module__ = body.__module__
        f.__doc__ = body.__doc__
        return f

    return njit(**JIT_PARALLEL)(twin("_parallel")), njit(**JIT)(twin("_serial"))


class CompileLog:
    """Numba compilations of this package's kernels in this process (cache loads excluded);
    a ``numba.core.event.Listener`` once numba is loaded.

    ``count``: specializations compiled (a kernel called from another compiles inside
    its caller and counts too); ``seconds``: wall time of the outermost compilations;
    ``kernels``: ``{module.function: count}``.
    """

    def __init__(self):
        self.count = 0
        self.seconds = 0.0
        self.kernels: dict[str, int] = {}
        self.notice = os.environ.get("LANCE_MINHASH_COMPILE_NOTICE", "1") != "0"
        self._announced = False
        self._lock = threading.Lock()
        self._local = threading.local()
        self._running = 0  # outermost compilations running, on any thread
        self._line: StatusLine | None = None  # shown while one runs (on a terminal, with the notice on)

    @staticmethod
    def _ours(ev) -> str | None:
        func = getattr(ev.data.get("dispatcher"), "py_func", None)
        module = getattr(func, "__module__", "") or ""
        if module.split(".")[0] != _PACKAGE:
            return None
        return f"{module}.{func.__name__}"

    def on_start(self, ev) -> None:
        name = self._ours(ev)
        if name is None:
            return
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        with self._lock:
            self.count += 1
            self.kernels[name] = self.kernels.get(name, 0) + 1
            first = not self._announced
            self._announced = True
        if depth == 0:
            self._local.t0 = time.perf_counter()
        # a helper compiles the next first calls' kernels meanwhile (runtime/compile_ahead.py)
        helped = first and CACHE and bool(FIRST_COMPILE) and FIRST_COMPILE[0](name)
        if first and self.notice:
            fresh_line = "\r\033[K" if sys.stderr.isatty() else ""  # over a status line the terminal shows
            print(fresh_line + COMPILE_NOTICE.format(where=_cache_place(ev.data["dispatcher"]),
                                                     helper=HELPER_NOTE if helped else ""), file=sys.stderr, flush=True)
        if depth == 0:
            with self._lock:
                self._running += 1
                if self._running == 1 and self.notice:
                    self._line = StatusLine(COMPILING, on_terminal()).start()

    def notify(self, ev) -> None:
        if ev.is_start:
            self.on_start(ev)
        elif ev.is_end:
            self.on_end(ev)

    def on_end(self, ev) -> None:
        if self._ours(ev) is None:
            return
        self._local.depth -= 1
        if self._local.depth == 0:
            elapsed = time.perf_counter() - self._local.t0
            line = None
            with self._lock:
                self.seconds += elapsed
                self._running -= 1
                if self._running == 0:
                    line, self._line = self._line, None
            if line is not None:
                line.stop()


def _cache_place(dispatcher) -> str:
    if not CACHE:
        return " (disabled by LANCE_MINHASH_NUMBA_CACHE=0: every run compiles)"
    try:
        return f" in {dispatcher._cache._cache_path}"
    except AttributeError:  # numba's cache layout is private; the notice stays useful without it
        return ""


COMPILES = CompileLog()
