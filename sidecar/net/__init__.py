"""The HTTP client side both adapters share: httpx over aiohttp's client (``backend``), upstream
clients that keep no cookies (``cookies``), and the one place httpx's exceptions become transport
faults (``transport.fault_of``)."""
