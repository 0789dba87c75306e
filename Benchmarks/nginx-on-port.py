#!/usr/bin/env python3
"""Starts nginx on a loopback port the system chose, with nobody able to take it in between:
binds 127.0.0.1:0 here, writes the configuration with @PORT@ replaced by that port and the port
to PORT_FILE, then becomes nginx with the socket as its inherited listener (the NGINX variable,
which nginx reads for a binary upgrade: a `listen` on that address takes the socket as it is).

    Benchmarks/nginx-on-port.py TEMPLATE CONFIG PORT_FILE -- nginx ARGS..."""
import os
import socket
import sys

template, config, port_file, separator, *command = sys.argv[1:]
assert separator == "--" and command, __doc__
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(4096)
listener.set_inheritable(True)
port = listener.getsockname()[1]
with open(template) as source, open(config, "w") as target:
    target.write(source.read().replace("@PORT@", str(port)))
with open(port_file + ".tmp", "w") as out:
    out.write(f"{port}\n")
os.rename(port_file + ".tmp", port_file)
os.environ["NGINX"] = f"{listener.fileno()};"
os.execvp(command[0], command)
