"""The default floating dtype, as ``aiograd.set_default_dtype`` sets it (PyTorch's).

It is what a Python float becomes (in ``tensor()`` and in type promotion with a
tensor), what an integer tensor becomes when a float number or a true division
meets it, what the float functions of an integer tensor return (``sqrt``,
``erf``, ...) and what the factories make without ``dtype=``. Read it as
``_defaults.FLOAT`` at call time: ``set_default_dtype`` rebinds it.
"""

from __future__ import annotations

import numpy

FLOAT = numpy.dtype(numpy.float32)
