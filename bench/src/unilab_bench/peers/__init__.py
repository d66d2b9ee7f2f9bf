"""Other projects' own G1 flat-velocity envs, timed like ours on the same GPU: ``unilab-bench peer``.

``driver`` (run by path in the peer's own Python: it imports the standard library, torch and the
peer, nothing of ours) builds the peer's env as its users build it and times it; ``command`` is the
CLI that runs the driver in a subprocess with the peer's site folder(s) on PYTHONPATH, completes
its record and appends a compact one to the results store (``record``). ``kit/`` holds the device
kit's sources: ``pack.sh`` (the wheels each peer imports on the env-stepping path, packed into
carry folders under ``.dev/peers``), ``install.sh`` (run on the GPU machine) and its README.
"""
