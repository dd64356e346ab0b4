"""shredd: the Python client of shredd, a crypto-shredding key management
service for AI-agent memory stores (docs/clients.md, docs/api.md).

    import shredd
    c = shredd.Client("http://127.0.0.1:7750", token)   # or shredd.AsyncClient(...) under asyncio
    sealed = c.sealing.encrypt("episodic", b"Alice prefers green tea.", subject="alice@example.com")
    try:
        c.sealing.decrypt(sealed.ciphertext)
    except shredd.Shredded:
        ...  # a subject of the data was forgotten: the data is erased

The HTTP part uses the standard library only. The holder kit
(shredd.holder.HolderKit) and signature checks (shredd.verify) need the
optional ``cryptography`` package; importing shredd does not.
"""

from ._http import DEFAULT_URL, Response
from .client import MAX_BATCH, Artifacts, Client, Forgets, Holders, Kinds, Leases, Log, Sealing, Unit
from .aio import AsyncClient, AsyncUnit
from .errors import (APIError, Conflict, Error, Forbidden, InternalError, InvalidEnvelope, InvalidInput, InvalidRequest,
                     InvalidSignature, MethodNotAllowed, NoLog, NotErased, NotForgotten, NotFound, NotLogged, Shredded, Timeout,
                     TooLarge, TransportError, Unauthorized, Unavailable, UndeclaredDerivation, UnknownKind,
                     UnknownParent, UnsupportedMediaType, WaitTimeout, WrongHolder)
from .types import (AckResult, Artifact, ArtifactRead, Condition, Decrypted, DecryptItem, DecryptResult, Encrypted, EncryptItem,
                    EncryptResult, Epoch,
                    Forget, ForgetPage, Health, Holder, HolderPage, HolderStatus, InventoryItem, InventoryReport,
                    InventoryStatus, Kind, Lease, Preview, PreviewArtifact, PreviewCounts, ProbeResult, ProbeWork, PurgeWork, RawDecrypted,
                    RawEncrypted, Ready, Reinstatement, Sealed, SealResult)

__version__ = "0.1.0"

__all__ = [
    "Client", "AsyncClient", "Kinds", "Sealing", "Leases", "Unit", "AsyncUnit", "Artifacts", "Forgets", "Holders", "Log", "MAX_BATCH", "DEFAULT_URL",
    "Response",
    "Error", "InvalidInput", "TransportError", "Timeout", "WaitTimeout", "APIError", "InvalidRequest", "UnknownKind", "UnknownParent",
    "InvalidSignature", "Unauthorized", "Forbidden", "WrongHolder", "NotFound", "MethodNotAllowed", "Conflict",
    "NotErased", "NotForgotten", "NotLogged", "UndeclaredDerivation", "Shredded", "TooLarge", "UnsupportedMediaType", "InvalidEnvelope", "Unavailable",
    "NoLog", "InternalError",
    "EncryptItem", "DecryptItem",
    "AckResult", "Artifact", "ArtifactRead", "Condition", "Decrypted", "DecryptResult", "Encrypted", "EncryptResult", "Epoch",
    "Forget", "ForgetPage", "Health", "Holder", "HolderPage", "HolderStatus", "InventoryItem", "InventoryReport",
    "InventoryStatus", "Kind", "Lease", "Preview",
    "PreviewArtifact", "PreviewCounts", "ProbeResult", "ProbeWork", "PurgeWork", "RawDecrypted", "RawEncrypted", "Ready", "Reinstatement", "Sealed", "SealResult",
]
