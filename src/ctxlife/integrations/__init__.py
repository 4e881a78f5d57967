"""Adapters that map a framework's interception points onto ctxlife's hookspecs."""
