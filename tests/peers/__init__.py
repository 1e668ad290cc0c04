"""Agent frameworks as real peers of the doors, each at its pinned release (docs/peers.md); vercel/
and llamaindex/ are the Node peer's and the LlamaIndex peer's own folders."""
