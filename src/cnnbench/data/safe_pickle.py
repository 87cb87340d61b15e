"""Reading a pickle that may come from anyone, allowing only what CIFAR's official files hold.

``pickle.load`` runs whatever callables a file names: a "data set" downloaded from anywhere
could run ``os.system`` the moment it is read. CIFAR's python batches hold dicts, lists,
bytes, str and int, which pickle builds without looking up any global, and numpy arrays,
which it builds from exactly three globals: numpy's array reconstructor, ``numpy.ndarray``
and ``numpy.dtype``. A batch re-pickled by Python 3 at protocol 2 also spells each bytes
object as ``_codecs.encode(text, "latin1")``; that one is answered by a function that does
only that encoding. :class:`RestrictedUnpickler` hands out these and refuses every other
global before it is imported or called (Python's "Restricting Globals" recipe), so a
payload fails with :class:`ForbiddenGlobal` and runs nothing. No torch here.
"""

from __future__ import annotations

import pickle
from typing import IO, Any

import numpy as np


class ForbiddenGlobal(pickle.UnpicklingError):
    """The pickle names a global that a CIFAR batch never holds (and would run code)."""


# numpy < 2 pickles the reconstructor as numpy.core.multiarray._reconstruct; numpy 2 writes
# numpy._core.multiarray._reconstruct. Both names map to the one function of this numpy.
_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(0, np.uint8))[0]


def _latin1_bytes(text: str, encoding: str = "latin1", errors: str = "strict") -> bytes:
    """``_codecs.encode`` as a protocol-2 pickle of bytes uses it, and no other way."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1") or errors != "strict":
        raise ForbiddenGlobal(f"refused _codecs.encode with {encoding!r}: only latin1 text spells bytes")
    return text.encode("latin1")


ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_bytes,
}
"""The only globals a CIFAR batch may name, by (module, name) as the pickle spells them."""


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only :data:`ALLOWED_GLOBALS` and refuses the rest."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise ForbiddenGlobal(f"refused to load {module}.{name}: a CIFAR batch holds only dicts, lists, "
                                  "bytes, str, int and numpy arrays") from None


def safe_load(f: IO[bytes], encoding: str = "bytes") -> Any:
    """Unpickle ``f`` with :class:`RestrictedUnpickler` (``encoding`` for Python 2 ``str``)."""
    return RestrictedUnpickler(f, encoding=encoding).load()
