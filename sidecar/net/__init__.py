"""The HTTP client side both adapters share: httpx on a plain-asyncio backend, and the one place
its exceptions become transport faults (``transport.fault_of``)."""
