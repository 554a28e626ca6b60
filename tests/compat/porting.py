"""Running a ported program: its text with `jitad` renamed back to the original library."""


def run(source, lib):
    """Execute a program's text with `jitad` renamed to `lib` in it; its globals."""
    namespace = {"__name__": "__port__"}
    exec(compile(source.replace("jitad", lib), f"<port through {lib}>", "exec"), namespace)
    return namespace
