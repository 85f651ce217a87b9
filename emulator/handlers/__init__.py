"""REST verbs with kube-apiserver's semantics over `Storage`, one module per kind of request.

    backend        the registry, storage and settings every verb shares; object encoding
    context        a write's options and warnings (the shared write context)
    body           decoding a write's body, checking its type and its name against the URL
    selection      label and field selectors, list options
    read           GET, LIST (snapshots, pages, tables)
    watch          WATCH
    create         CREATE
    update         UPDATE, and the steps of every change to a stored object
    patch          PATCH and server-side apply
    subresources   /status, /approval, /finalize and /scale
    delete         DELETE, DELETECOLLECTION

Every handler raises `ApiError` on failure; `ApiServer` turns it into a Status body.
"""

from __future__ import annotations

from .backend import Backend, PatchEngines, ServerConfig
from .context import WriteCtx
from .create import Creates
from .delete import Deletes
from .patch import Patches
from .read import Reads
from .subresources import Scales
from .update import Updates
from .watch import Watches

__all__ = ["Backend", "Handlers", "PatchEngines", "ServerConfig", "WriteCtx"]


class Handlers:
    """The verbs' handlers over one registry and storage, wired to each other."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.reads = Reads(self.backend)
        self.watches = Watches(self.backend)
        self.creates = Creates(self.backend)
        self.updates = Updates(self.backend, self.creates)
        self.scales = Scales(self.backend, self.updates)
        self.patches = Patches(self.backend, self.creates, self.updates, self.scales)
        self.deletes = Deletes(self.backend)
