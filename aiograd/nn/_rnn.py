"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and their one-step cells.

Each time step composes differentiable tensor ops (linear, sigmoid, tanh, mul, add),
so backward needs nothing of its own: backpropagation through time is the graph
the steps record. The input-to-hidden product of a whole layer is one matmul over
the sequence, done before the time loop; only the hidden-to-hidden product runs per
step. Node names are the composed ops'; the results' last ops are PyTorch's (outputs
and states stacked: ``StackBackward0``), except where PyTorch's fused CPU LSTM kernel
records ``MkldnnRnnLayerBackward0`` for the LSTM's output.

Parameters carry PyTorch's names, shapes, order and gate layout, so a PyTorch
state_dict loads: ``weight_ih_l{k}`` ``(G * hidden_size, input)``, ``weight_hh_l{k}``
``(G * hidden_size, hidden_size)``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` (``_reverse``
appended for the backward direction), with the gates stacked as PyTorch stacks them:
LSTM ``(i, f, g, o)`` (G = 4), GRU ``(r, z, n)`` (G = 3), RNN one block (G = 1).
All are initialised U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch's.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

from .._ops.joining import cat, stack
from .._ops.nn_extra import dropout
from .._ops.nn_ops import linear
from .._ops.unary import relu
from .._tensor import Tensor, _resolve_dtype, zeros
from ._layers import _uniform
from ._module import Module, Parameter

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]

# A cell step: (input-to-hidden product gi, state, weight_hh, bias_hh) -> new state, where
# the state is (h,) or, for the LSTM, (h, c).
State = tuple[Tensor, ...]
Step = Callable[[Tensor, State, Tensor, "Tensor | None"], State]


# ---- one time step ----

def _lstm_step(gi: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
    h, c = state
    i, f, g, o = (gi + linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_step(gi: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
    (h,) = state
    r_i, z_i, n_i = gi.chunk(3, -1)
    r_h, z_h, n_h = linear(h, w_hh, b_hh).chunk(3, -1)
    r = (r_i + r_h).sigmoid()
    z = (z_i + z_h).sigmoid()
    n = (n_i + r * n_h).tanh()
    return (n + z * (h - n),)  # (1 - z) * n + z * h


def _tanh_step(gi: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
    return ((gi + linear(state[0], w_hh, b_hh)).tanh(),)


def _relu_step(gi: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
    return (relu(gi + linear(state[0], w_hh, b_hh)),)


_RNN_STEPS: dict[str, Step] = {"tanh": _tanh_step, "relu": _relu_step}


def _rnn_nonlinearity(nonlinearity: str) -> Step:
    if nonlinearity not in _RNN_STEPS:
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
    return _RNN_STEPS[nonlinearity]


def _init_weights(module: Module, names: list[str], shapes: list[tuple[int, ...]],
                  hidden_size: int, device: Any, dtype: Any) -> None:
    """Register the parameters ``names`` of ``shapes``, U(-1/sqrt(hidden), 1/sqrt(hidden))."""
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    dt = _resolve_dtype(dtype)
    for name, shape in zip(names, shapes):
        setattr(module, name, Parameter(_uniform(shape, bound, dt, device)))


# ---- multi-layer recurrent networks ----

class _RNNBase(Module):
    """The layers, directions and time loop shared by RNN, LSTM and GRU."""

    _gates: int  # G: the blocks stacked in weight_ih / weight_hh
    _has_cell: bool = False  # the state is (h, c), not (h,)

    def __init__(self, step: Step, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size),
                           ("num_layers", num_layers)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name}: {arg} should be of type int, got: "
                                f"{type(value).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}", UserWarning, stacklevel=3)
        self._step = step
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        directions = 2 if bidirectional else 1
        gate_size = self._gates * hidden_size
        names: list[str] = []
        shapes: list[tuple[int, ...]] = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                names += [f"weight_ih{suffix}", f"weight_hh{suffix}"]
                shapes += [(gate_size, layer_input), (gate_size, hidden_size)]
                if bias:
                    names += [f"bias_ih{suffix}", f"bias_hh{suffix}"]
                    shapes += [(gate_size,), (gate_size,)]
        self._flat_weights_names = names
        _init_weights(self, names, shapes, hidden_size, device, dtype)

    def flatten_parameters(self) -> None:
        """Nothing to do: PyTorch's cuDNN weight packing has no aiograd counterpart."""

    @property
    def all_weights(self) -> list[list[Tensor]]:
        """The parameters of each layer and direction, as PyTorch's."""
        per = 4 if self.bias else 2
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _weights(self, layer: int, direction: int) -> tuple[Tensor, Tensor, Any, Any]:
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        if self.bias:
            return (getattr(self, f"weight_ih{suffix}"), getattr(self, f"weight_hh{suffix}"),
                    getattr(self, f"bias_ih{suffix}"), getattr(self, f"bias_hh{suffix}"))
        return getattr(self, f"weight_ih{suffix}"), getattr(self, f"weight_hh{suffix}"), None, None

    def _initial_state(self, hx: Any, batch: int, batched: bool, like: Tensor) -> list[Tensor]:
        """``[h0]`` or ``[h0, c0]``, each ``(num_layers * directions, N, hidden_size)``."""
        name = type(self).__name__
        expected = (self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)
        if hx is None:
            h0 = zeros(*expected, dtype=like.dtype, device=like.device)
            return [h0, h0] if self._has_cell else [h0]
        states = list(hx) if self._has_cell else [hx]
        if self._has_cell and len(states) != 2:
            raise TypeError(f"{name}: hx must be a tuple (h_0, c_0) of two Tensors")
        checked = []
        for state in states:
            if not isinstance(state, Tensor):
                raise TypeError(f"{name}: hx must be Tensors, got {type(state).__name__}")
            if not batched:
                if state.ndim != 2:
                    raise RuntimeError(
                        f"For unbatched 2-D input, hx should also be 2-D but got "
                        f"{state.ndim}-D tensor")
                state = state.unsqueeze(1)
            if tuple(state.shape) != expected:
                raise RuntimeError(
                    f"Expected hidden size {expected}, got {list(state.shape)}")
            checked.append(state)
        return checked

    def _direction(self, gi: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None,
                   reverse: bool) -> tuple[Tensor, State]:
        """Run the time loop over ``gi`` ``(L, N, G * hidden)``: ``(outputs, last state)``."""
        length = gi.shape[0]
        outputs: list[Tensor] = [gi] * length  # placeholders, all overwritten
        for t in (range(length - 1, -1, -1) if reverse else range(length)):
            state = self._step(gi[t], state, w_hh, b_hh)
            outputs[t] = state[0]
        return stack(outputs, 0), state

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Any]:  # noqa: A002
        """``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``), as PyTorch's.

        ``input`` is ``(L, N, input_size)`` (``(N, L, input_size)`` with
        ``batch_first``) or unbatched ``(L, input_size)``; the states are
        ``(num_layers * directions, N, hidden_size)`` (unbatched: without N) and
        default to zeros. ``output`` holds the last layer's ``h`` at every step, the two
        directions concatenated.
        """
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, not {type(input).__name__}")
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D "
                             "instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        batched = input.ndim == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        initial = self._initial_state(hx, input.shape[1], batched, input)
        directions = 2 if self.bidirectional else 1
        finals: list[list[Tensor]] = [[] for _ in initial]
        layer_input = input
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
                index = layer * directions + direction
                state = tuple(s[index] for s in initial)
                out, state = self._direction(linear(layer_input, w_ih, b_ih), state, w_hh,
                                             b_hh, reverse=direction == 1)
                outputs.append(out)
                for final, s in zip(finals, state):
                    final.append(s)
            layer_input = outputs[0] if directions == 1 else cat(outputs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = dropout(layer_input, self.dropout, True)
        output = layer_input
        states = [stack(final, 0) for final in finals]
        if not batched:
            output = output.squeeze(1)
            states = [s.squeeze(1) for s in states]
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, (tuple(states) if self._has_cell else states[0])

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    """``RNN(input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
    batch_first=False, dropout=0.0, bidirectional=False)``, as ``torch.nn.RNN``:
    ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""

    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(_rnn_nonlinearity(nonlinearity), input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    """``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
    dropout=0.0, bidirectional=False, proj_size=0)``, as ``torch.nn.LSTM``::

        i, f, g, o = split(x W_ih^T + b_ih + h W_hh^T + b_hh)
        c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
        h' = sigmoid(o) * tanh(c')

    ``proj_size`` other than 0 is not supported.
    """

    _gates = 4
    _has_cell = True

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        if proj_size != 0:
            raise NotImplementedError("aiograd's LSTM does not support proj_size; pass 0")
        super().__init__(_lstm_step, input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device, dtype)
        self.proj_size = 0


class GRU(_RNNBase):
    """``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
    dropout=0.0, bidirectional=False)``, as ``torch.nn.GRU``::

        r, z, n_x = split(x W_ih^T + b_ih);  r_h, z_h, n_h = split(h W_hh^T + b_hh)
        r = sigmoid(r + r_h);  z = sigmoid(z + z_h);  n = tanh(n_x + r * n_h)
        h' = (1 - z) * n + z * h
    """

    _gates = 3

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__(_gru_step, input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device, dtype)


# ---- cells: one step, one layer ----

class _CellBase(Module):
    """``weight_ih (G * hidden, input)``, ``weight_hh (G * hidden, hidden)``, ``bias_ih``,
    ``bias_hh``, as PyTorch's cells; ``forward`` runs one step."""

    _gates: int
    _has_cell: bool = False

    def __init__(self, step: Step, input_size: int, hidden_size: int, bias: bool,
                 device: Any, dtype: Any) -> None:
        super().__init__()
        self._step = step
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gate_size = self._gates * hidden_size
        names = ["weight_ih", "weight_hh"]
        shapes: list[tuple[int, ...]] = [(gate_size, input_size), (gate_size, hidden_size)]
        if bias:
            names += ["bias_ih", "bias_hh"]
            shapes += [(gate_size,), (gate_size,)]
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        _init_weights(self, names, shapes, hidden_size, device, dtype)

    def _run(self, input: Tensor, hx: Any) -> State:  # noqa: A002
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, not {type(input).__name__}")
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D "
                             "instead")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            h0 = zeros(input.shape[0], self.hidden_size, dtype=input.dtype,
                       device=input.device)
            state: State = (h0, h0) if self._has_cell else (h0,)
        else:
            state = tuple(hx) if self._has_cell else (hx,)
            if len(state) != (2 if self._has_cell else 1) or not all(
                    isinstance(t, Tensor) for t in state):
                raise TypeError(f"{name}: hx must be "
                                + ("a tuple (h_0, c_0) of two Tensors" if self._has_cell
                                   else "a Tensor") + f", not {type(hx).__name__}")
            if not batched:
                state = tuple(s.unsqueeze(0) for s in state)
        gi = linear(input, self.weight_ih, self.bias_ih)
        state = self._step(gi, state, self.weight_hh, self.bias_hh)
        return state if batched else tuple(s.squeeze(0) for s in state)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """``RNNCell(input_size, hidden_size, bias=True, nonlinearity="tanh")``: one step of
    :class:`RNN`; ``forward(input, hx=None)`` returns ``h'``."""

    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        super().__init__(_rnn_nonlinearity(nonlinearity), input_size, hidden_size, bias,
                         device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        return self._run(input, hx)[0]


class LSTMCell(_CellBase):
    """``LSTMCell(input_size, hidden_size, bias=True)``: one step of :class:`LSTM`;
    ``forward(input, hx=None)`` with ``hx = (h, c)`` returns ``(h', c')``."""

    _gates = 4
    _has_cell = True

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(_lstm_step, input_size, hidden_size, bias, device, dtype)

    def forward(self, input: Tensor,  # noqa: A002
                hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        h, c = self._run(input, hx)
        return h, c


class GRUCell(_CellBase):
    """``GRUCell(input_size, hidden_size, bias=True)``: one step of :class:`GRU`;
    ``forward(input, hx=None)`` returns ``h'``."""

    _gates = 3

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(_gru_step, input_size, hidden_size, bias, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        return self._run(input, hx)[0]
