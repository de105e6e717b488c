"""IndexFile: message keys (``topic#KEYS`` tokens, ``topic#UNIQ_KEY``) to CommitLog offsets."""

from mqstore.index.file import IndexFile
from mqstore.index.service import IndexService, QueryOffsetResult

__all__ = ["IndexFile", "IndexService", "QueryOffsetResult"]
