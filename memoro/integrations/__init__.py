"""memoro inside agent frameworks: one thin module per framework.

Each module maps a framework's seam (dynamic instructions, tools, run
context, the end of a run) onto memoro's service — the embedded ``Memoro``
or the remote ``MemoroClient`` alike — and holds no rule of its own.
Importing one without its framework says which extra to install;
``_common`` holds what they all share.
"""
