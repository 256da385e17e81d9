"""The confined file layer: every workspace path checked and walked without following a
link out. Below both the librarian and the agent's tools, which import it.

``confined`` holds a workspace folder open and reads, writes and moves through folder
descriptors; ``walk`` is its bounded walk; ``paths`` checks model-supplied paths.
"""
