"""A worker process for the distributed tests: serve until rank 0 shuts down."""
import sys

from aiograd.distributed import rpc

rank = int(sys.argv[1])
rpc.init_rpc(f"worker{rank}", timeout=float(sys.argv[2]) if len(sys.argv) > 2 else 30.0)
rpc.shutdown(graceful=True, timeout=600)
