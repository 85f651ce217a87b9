"""The execution controller, one module per job:

- controller.py   the reconciler: Work events in, conditions and status out
- apply.py        server-side apply of a Work's manifests, one outcome per manifest
- drift.py        our own writes, to tell a change by someone else from ours
- ownership.py    which Work may write an object; Works waiting for another Work's object
- deletion.py     a Work being deleted or gone: member objects, finalizer, record, orphans
- deletion_guard.py  no mass deletion right after a long control-plane outage
"""

from .controller import ExecutionController, build

__all__ = ["ExecutionController", "build"]
