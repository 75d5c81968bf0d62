"""The shared plumbing below the sources: Arrow <-> Chunk, schemas, paths and storage, retries, publishing.

It imports only ``core`` and ``errors``; every name here is public to the layers above.
"""
