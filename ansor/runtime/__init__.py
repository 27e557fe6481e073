"""Files an exported network library ships with (``ansor.graph.export_library`` copies them
beside ``net.so``): ``ansor_runtime.py`` (the standalone loader: ctypes and numpy only, imports
nothing of this package), ``ansor_net.h`` (the library's C ABI) and ``example.c``."""
