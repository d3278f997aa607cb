"""A worker process for the distributed tests: serve until rank 0 shuts down."""
import json
import sys

from aiograd.distributed import rpc

rank = int(sys.argv[1])
options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
rpc.init_rpc(f"worker{rank}", timeout=float(sys.argv[2]) if len(sys.argv) > 2 else 30.0, **options)
try:
    rpc.shutdown(graceful=True, timeout=600)
except rpc.RemoteError as e:  # rank 0 left without the barrier (a failure test killed a peer)
    print(f"worker{rank}: non-graceful shutdown: {e}", file=sys.stderr)
