"""Borrowed arrays: views that numba counts no references of.

numba counts the references of every array an inlined helper receives (an atomic add and
an atomic subtract on the array's memory record, each a call), and drops the pair only
when both fall in one basic block; in a row loop whose helpers hold loops, they do not,
so each row paid dozens of atomic operations (``docs/performance.md``, the build).
:func:`borrowed` gives the same array without its memory record: numba still emits the
calls, which return at once on a null record. The caller keeps the original alive for as
long as the view is used (a kernel's own arguments and buffers, for the kernel's run),
and no view is returned or kept.
"""

from __future__ import annotations

from lance_minhash_sql.kernels.config import intrinsic


@intrinsic
def borrowed(typingctx, arr):
    """``arr`` as a view without numba's memory record (no reference counting); valid while
    ``arr`` lives."""
    from numba.core import cgutils, types

    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):
        model = context.data_model_manager[signature.args[0]]
        value = args[0]
        for field in ("meminfo", "parent"):
            at = model.get_field_position(field)
            value = builder.insert_value(value, cgutils.get_null_value(value.type.elements[at]), at)
        return value

    return arr(arr), codegen


@intrinsic
def keep_alive(typingctx, held):
    """Nothing, but a use of ``held``: numba frees an array after its last use, so a kernel
    that makes :func:`borrowed` views of arrays it created calls this after its last use
    of the views."""
    from numba.core import types

    def codegen(context, builder, signature, args):
        return context.get_dummy_value()

    return types.none(held), codegen
