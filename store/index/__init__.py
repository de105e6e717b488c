"""IndexFile: message keys (``topic#KEYS`` tokens, ``topic#UNIQ_KEY``) to CommitLog offsets."""

from store.index.file import IndexFile
from store.index.service import IndexService, QueryOffsetResult

__all__ = ["IndexFile", "IndexService", "QueryOffsetResult"]
