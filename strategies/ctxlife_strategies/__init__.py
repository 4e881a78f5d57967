"""ctxlife's first-party strategies.

Each module here is written only against the public ``ctxlife`` API and is found
through the ``ctxlife.strategies`` entry-point group, exactly like a third-party
strategy package.
"""
