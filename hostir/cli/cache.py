"""`hostir cache info|clear`: the disk cache of compiled kernels (HOSTIR_CACHE_DIR).
Plans and in-memory kernels belong to a process; `fd.cache_info()` shows those."""
from __future__ import annotations

from .. import config
from ..host.cache import human_bytes as _size
from ..runtime import nvrtc


def cache_command(action: str) -> int:
    where = config.get().cache_dir / "kernels"
    if action == "info":
        entries, nbytes = nvrtc.disk_usage()
        state = "" if where.is_dir() else " (does not exist yet)"
        print(f"kernel cache: {where}{state}\n"
              f"  cubins: {entries}\n"
              f"  bytes:  {nbytes} ({_size(nbytes)})\n"
              f"  set HOSTIR_CACHE_DIR to move it; `hostir cache clear` empties it")
        return 0
    removed, nbytes = nvrtc.clear_disk_cache()
    print(f"kernel cache: {where}: removed {removed} file(s), {_size(nbytes)}")
    return 0
