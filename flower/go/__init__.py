"""`flower go`: one sentence to a judged result (L-11..L-14).

The starter flow (clarify -> goal -> work judged in rounds -> bequest) and the pieces only it needs: the
bequest block for the next tool, and the wake decision (whether a new `flower go` wakes the last run,
starts over, or refuses). It sits on the workflow engine (`flower.flow`) and the human channel
(`flower.human`); the command line drives it.
"""
