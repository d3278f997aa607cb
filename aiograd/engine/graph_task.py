"""GraphTask: the state of one backward pass (seed ``graph_task.h``).

A GraphTask is created by ``backward()``/``grad()`` and lives until its
caller has its result. Its nodes run on the executors (device workers, or the
caller's thread); its driver (the awaiting coroutine, or the blocked sync
caller) is woken once, when the task finishes.

Which thread touches what:

- ``dependencies``, ``not_ready``, ``outstanding``, ``active``, ``captured``,
  ``error``, ``leaf_streams``: under ``lock``, by any executor.
- ``stopped``: written under ``lock``; read without it by executors before
  each node (a stale read lets at most the node already chosen run, and the
  driver still waits for ``active == 0`` before it returns).
- ``final_callbacks``: appended by ``queue_callback`` from nodes (under
  ``lock``), drained by the driver after all nodes ran.
- ``hooked_nodes``: set once, by the first executor to ask ``will_execute``.

Note [Completion]
    ``outstanding`` counts node tasks that exist (queued or running) and
    ``active`` counts executors inside a slice of this task (plus async nodes
    running on the loop). The task is finished when ``active == 0`` and
    either ``outstanding == 0`` (success) or ``stopped`` (error or
    cancellation). Whoever makes that true calls ``waker`` exactly once.
    The counts change only through GraphTask's methods (``start``,
    ``enter``/``leave``, ``retire``, ``add_ready_locked``, ``fail``,
    ``node_failed``), and
    ``try_finish`` alone decides the task is finished: the engine states
    what happened, the rule stays here.

Note [Fair scheduling]
    Every device worker is shared by all GraphTasks of the process, and its
    ReadyQueue orders node tasks by one key: (reentrant depth, deeper first;
    then the task's *rank*, smaller first; then ``sequence_nr``, higher
    first). Within one GraphTask the rank is constant, so its order is
    exactly PyTorch's (depth, then sequence_nr). Across GraphTasks the rank
    decides, and the sequence numbers (one process-wide counter, newer nodes
    higher) never do: before the rank existed every node of a newer pass
    outranked every node of an older one, and under load old passes starved.

    The rank is fixed once, when the pass is submitted (``schedule``): its
    *due time*, earliest first (Note [Deadlines]), ties broken by arrival.
    A pass without a deadline is due ``no_deadline_horizon`` seconds after
    it arrived, so passes without deadlines run in arrival order (FIFO), and
    no pass ever waits behind a pass with the same kind of due time that
    arrived after it. A worker runs one pass's ready nodes for a time slice
    (Note [Time slices]); at the end of a slice it keeps going if the head of
    its queue does not outrank the pass, so the leftovers of an older pass
    do not lose their place to newer work.

    Head-of-line blocking: a pass that arrives while a huge one runs waits
    until every pass due before it (in practice: that arrived before it) has
    finished its nodes on this worker, plus at most one node of whatever was
    running (a slice ends only between nodes). FIFO is deliberate: round-robin
    slices would let every newer pass delay the older ones, which is what
    made the p99 latency of a loaded service grow without bound; under FIFO
    each pass's wait is bounded by the work queued before it, which a service
    controls (admission), and a pass that must not wait behind a big one can
    say so with a deadline. Nested (reentrant) passes run before the
    shallower ones, whatever their rank: their parent waits for them.

Note [Deadlines]
    ``await backward()``/``await grad()`` inside a cancel scope with a deadline
    (``anyio.fail_after``/``move_on_after``, ``asyncio.timeout``, a Trio cancel
    scope: anyio's ``current_effective_deadline()`` sees all of them), or with
    the keyword-only ``deadline=`` (a ``time.monotonic()`` time), is due at
    that deadline, the earlier of the two if both. Among passes on one
    worker, the one due first runs first (earliest deadline first).

    A pass whose due time has passed starts no node: the executor checks
    before each node. A pass stopped by its cancel scope's deadline ends as
    the scope says (``move_on_after`` moves on, ``fail_after`` raises
    TimeoutError); one stopped by ``deadline=`` raises TimeoutError. Nodes
    that already ran keep their effects (``.grad`` may hold part of the sum),
    as with cancellation.

    Passes without a deadline are due ``no_deadline_horizon`` seconds (1 s by
    default, ``aiograd.engine.set_no_deadline_horizon``) after they arrived.
    So while passes with deadlines saturate a worker, a pass without one
    waits behind those due before its horizon, and never longer: a pass with
    a deadline that arrives after that horizon ran out is due later, and
    waits behind it. A larger horizon favours deadline passes more.
"""

from __future__ import annotations

import contextvars
import itertools
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from ..graph._context import checkpoint_valid as checkpoint_valid  # re-exported
from ..graph._context import current_graph_task as current_graph_task  # re-exported
from ..graph._node import Node
from .ready_queue import _RANK_LIMIT, ReadyQueue, task_key

_ids = itertools.count(1)

class GraphTask:
    __slots__ = (
        "id",
        "keep_graph",
        "create_graph",
        "depth",
        "roots",
        "root_node",
        "root_inputs",
        "outputs",
        "accumulate_grad",
        "exec_info",
        "captures",
        "captured",
        "dependencies",
        "not_ready",
        "lock",
        "outstanding",
        "active",
        "stopped",
        "cancelled",
        "error",
        "final_callbacks",
        "context",
        "check_nan",
        "leaf_streams",
        "caller_streams",
        "cpu_queue",
        "port",
        "waker",
        "finished",
        "single_thread",
        "key_base",
        "warnings",
        "parent",
        "hooked_nodes",
        "deadline",
        "due",
        "due_by_scope",
        "arrival",
        "started",
        "run_time",
        "direct",
        "ready_at",
        "stop_at",
        "__weakref__",
    )

    def __init__(
        self,
        *,
        keep_graph: bool,
        create_graph: bool,
        depth: int,
        root_node: Node,
        root_inputs: list[Any],
        roots: list[Node],
        outputs: list[tuple[Node, int] | None] | None,
        accumulate_grad: bool,
        parent: GraphTask | None,
    ) -> None:
        self.id = next(_ids)
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.depth = depth
        self.root_node = root_node
        self.root_inputs = root_inputs
        self.roots = roots
        self.outputs = outputs
        self.accumulate_grad = accumulate_grad
        self.parent = parent
        # Invariant: exec_info is None (run every reachable node) or maps every node
        #            to run (True) or only capture at (False); absent nodes are skipped.
        self.exec_info: dict[Node, Any] | None = None
        # Invariant: captures[node] lists (input_nr, output_index) for grad() inputs at node.
        self.captures: dict[Node, list[tuple[int, int]]] = {}
        self.captured: list[Any] = []
        # Invariant: dependencies[node] == edges into node not yet delivered.
        self.dependencies: dict[Node, int] | None = None
        self.not_ready: dict[Node, list[Any]] = {}
        self.lock = threading.Lock()
        self.outstanding = 0
        self.active = 0
        self.stopped = False
        self.cancelled = False
        self.error: BaseException | None = None
        self.final_callbacks: list[Callable[[], Any]] = []
        self.context: contextvars.Context | None = None
        self.check_nan = False
        self.leaf_streams: set[Any] = set()
        self.caller_streams: dict[Any, Any] = {}
        self.cpu_queue: ReadyQueue | None = None
        self.port: Any = None
        self.waker: Callable[[], None] | None = None
        #: set once, under ``lock``, by whoever completes the task (Note [Completion])
        self.finished = False
        self.single_thread = False
        # ReadyQueue key of a node of this task: key_base - node.sequence_nr
        # (set again by ``schedule``: Note [Fair scheduling]).
        self.key_base = task_key(depth, 0)
        #: the caller's ``deadline=`` (a ``time.monotonic()`` time), or None
        self.deadline: float | None = None
        #: when the pass is due (``time.perf_counter()`` clock; inf: never);
        #: ``due_by_scope``: that time comes from the caller's cancel scope
        self.due = math.inf
        self.due_by_scope = False
        #: statistics (perf_counter): submitted, first node started, summed slice time
        self.arrival = 0.0
        self.started: float | None = None
        self.run_time = 0.0
        #: leaves may be accumulated while routing (Note [Direct accumulation])
        self.direct = not create_graph
        #: observed passes only: when each node became ready (``_report_node``)
        self.ready_at: dict[Node, float] = {}
        self.warnings: list[Any] = []
        # Invariant: hooked_nodes is None (not asked yet) or the nodes whose tensor
        #            pre-hooks this task calls (See will_execute).
        self.hooked_nodes: frozenset[Node] | None = None
        #: nodes that only capture (``grad()`` inputs) and whose own edges are not followed:
        #: the distributed engine's boundary of a partial pass (Note [Distributed pass])
        self.stop_at: frozenset[Node] = frozenset()

    # ---- graph analysis (run by the first executor, before any node) ----

    def prepare(self) -> None:
        """Compute dependencies and, for ``inputs=``/``grad()``, what to execute."""
        min_topo = 0
        outputs = self.outputs
        if outputs:
            min_topo = min((e[0].topological_nr for e in outputs if e is not None), default=0)
        self.dependencies = compute_dependencies(self.root_node, min_topo, self.stop_at)
        if outputs is not None:
            self._init_to_execute(outputs, min_topo)

    def _init_to_execute(self, outputs: list[tuple[Node, int] | None], min_topo: int) -> None:
        """Mark the nodes on a path to an output (seed ``init_to_execute``).

        ``exec_info[node]`` is True when the node must run; a node that is only
        captured (a ``grad()`` input) is present with False. Captures are the
        ``(input_nr, output_index)`` pairs to copy into ``captured``.
        """
        info: dict[Node, Any] = {}  # the root too runs only if it leads to an output
        captures: dict[Node, list[tuple[int, int]]] = {}
        for idx, edge in enumerate(outputs):
            if edge is None:
                continue
            node, input_nr = edge
            if self.accumulate_grad:
                info[node] = True
            else:
                info.setdefault(node, False)
                captures.setdefault(node, []).append((input_nr, idx))
        self.captured = [None] * len(outputs)
        # Iterative DFS: a node must run if a child runs or captures (post-order).
        stack: list[tuple[Node, int]] = [(self.root_node, 0)]
        seen = {self.root_node}
        while stack:
            node, i = stack[-1]
            edges = node.next_edges
            while i < len(edges):
                edge = edges[i]
                i += 1
                if edge is None:
                    continue
                child = edge[0]
                if child.topological_nr < min_topo:
                    continue
                if child not in seen:
                    seen.add(child)
                    if child not in self.stop_at:
                        stack[-1] = (node, i)
                        stack.append((child, 0))
                        break
                if child in info:  # it runs or captures: so must its parent
                    info[node] = True
            else:
                stack.pop()
                if stack and node in info:
                    info[stack[-1][0]] = True
        self.exec_info = info
        self.captures = captures

    def will_execute(self, node: Node) -> bool:
        """True if this task calls ``node``'s tensor pre-hooks: it runs ``node``, or
        captures a ``grad()`` input there (PyTorch's ``_will_engine_execute_node``).

        Asked by hooks, so after ``prepare``. Unlike PyTorch's, True for the root
        too (its pre-hooks always run) and for a leaf whose gradient ``grad()``
        captures. The nodes are found by one walk of the graph at the first
        question, so tasks that never ask pay nothing; executors racing on it find
        the same set, and storing it is atomic.
        """
        nodes = self.hooked_nodes
        if nodes is None:
            # Not pruned by min_topo as in prepare: the nodes below it are not in exec_info.
            reached = set(compute_dependencies(self.root_node, 0))
            if self.exec_info is not None:
                reached.intersection_update(self.exec_info)
            reached.add(self.root_node)
            nodes = self.hooked_nodes = frozenset(reached)
        return node in nodes

    # ---- scheduling (see Note [Fair scheduling]) ----

    def schedule(self, now: float, scope_due: float, horizon: float) -> None:
        """Fix this pass's due time and rank when it is submitted at ``now``.

        ``scope_due``: the deadline of the caller's cancel scope on the
        ``perf_counter`` clock (inf if none); ``horizon``: how long after its
        arrival a pass without a deadline is due (Note [Deadlines]).
        """
        self.arrival = now
        due = scope_due
        self.due_by_scope = due != math.inf
        if self.deadline is not None:
            explicit = now + (self.deadline - time.monotonic())
            if explicit <= due:
                due = explicit
                self.due_by_scope = False
        self.due = due
        ranked = due if due != math.inf else now + horizon
        # -inf: the scope is cancelled already (it starts no node anyway)
        micros = int(ranked * 1e6) if ranked > 0 else 0
        micros = min(micros, (_RANK_LIMIT >> 32) - 1)
        self.key_base = task_key(self.depth, 0, (micros << 32) | (self.id & 0xFFFFFFFF))

    def expired_error(self, node: Node) -> TimeoutError:
        """The error of a pass whose due time passed before ``node`` could start."""
        return TimeoutError(
            f"backward pass deadline expired before {node.name()} ran; no further node runs")

    # ---- completion (see Note [Completion]): every change of the counts goes here ----

    def start(self, cpu_queue: ReadyQueue, context: contextvars.Context, *, check_nan: bool,
              direct: bool) -> None:
        """Complete the task before its root is submitted: where its CPU nodes run,
        the context they run in, and one outstanding node task (the root)."""
        self.cpu_queue = cpu_queue
        self.context = context
        self.check_nan = check_nan
        self.direct = direct
        self.outstanding = 1

    def enter(self, tasks: int) -> bool:
        """An executor is about to run ``tasks`` node tasks of this task (a slice, or
        an async node). False if the task is stopped: they are retired unrun."""
        with self.lock:
            if self.stopped:
                self.outstanding -= tasks
                return False
            self.active += 1
            return True

    def leave(self, unrun: int) -> None:
        """The executor that ``enter``-ed is done; ``unrun`` of its tasks did not run."""
        with self.lock:
            self.active -= 1
            self.outstanding -= unrun

    def retire(self, tasks: int = 1) -> None:
        """``tasks`` node tasks are gone without making any node ready (a leaf ran, a
        node raised or was skipped, queued tasks were dropped)."""
        with self.lock:
            self.outstanding -= tasks

    def add_ready_locked(self, ready: int) -> None:
        """With ``lock`` held: a node task ran and made ``ready`` nodes ready, each a
        new task (one lock round per node: the caller holds it for the dependencies)."""
        self.outstanding += ready - 1

    def try_finish(self) -> Callable[[], None] | None:
        """If the task is finished (Note [Completion]), mark it so, once, and return its
        waker for the caller to call (after dropping its own references); else None."""
        with self.lock:
            if self.finished or self.active or not (self.outstanding == 0 or self.stopped):
                return None
            self.finished = True
        return self.waker

    def fail(self, exc: BaseException) -> None:
        """Record the first error and stop the task. Call without ``lock`` held."""
        with self.lock:
            if self.error is None and not self.cancelled:
                self.error = exc
            self.stopped = True

    def node_failed(self, node: Node, exc: BaseException, tasks: int) -> None:
        """``node`` raised ``exc``: ``tasks`` node tasks end with it (0 for a leaf added
        while routing); in anomaly mode the error notes the node's forward traceback."""
        if tasks:
            self.retire(tasks)
        if node.anomaly_trace and self.error is None:
            exc.add_note(f"Traceback of forward call that caused the error (node "
                         f"{node.name()}):\n{node.anomaly_trace}")
        self.fail(exc)

    def cancel(self) -> None:
        with self.lock:
            if not self.stopped:
                self.cancelled = True
            self.stopped = True

    def __repr__(self) -> str:
        return f"<GraphTask {self.id} depth={self.depth} outstanding={self.outstanding}>"


def compute_dependencies(root: Node, min_topo: int,
                         stop_at: frozenset[Node] = frozenset()) -> dict[Node, int]:
    """Count, for every node reachable from ``root``, the edges that point to it.

    A node with ``topological_nr < min_topo`` cannot lead to any output: its
    incoming edges are counted but its own edges are not followed (seed
    ``compute_dependencies``); nor are those of a node in ``stop_at``.
    Iterative, so a 100,000-node chain needs no recursion.
    """
    deps: dict[Node, int] = {}
    stack = [root]
    push = stack.append
    while stack:
        node = stack.pop()
        if node.topological_nr < min_topo or node in stop_at:
            continue
        for edge in node.next_edges:
            if edge is None:
                continue
            child = edge[0]
            if child in deps:
                deps[child] += 1
            else:  # first edge to it: visit it once (the root has no incoming edge)
                deps[child] = 1
                push(child)
    return deps
