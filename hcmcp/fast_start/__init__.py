"""The fast-start layer: the handshake answered before the heavy imports (stdio and --http).

Imports nothing (start-up): the command imports the module it needs, ``handshake`` (the generated
answers), ``stdio`` or ``http`` (the two read loops), ``background`` (the warm-up thread and the
signal wakeup they share). ``python -m hcmcp.fast_start`` regenerates ``handshake.json``.
"""
