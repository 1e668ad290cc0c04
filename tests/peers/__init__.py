"""Agent frameworks as real peers of the doors, each at its pinned release (docs/peers.md); vercel/
is the Node peer's folder."""
