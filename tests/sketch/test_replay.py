

def test_fit_lengths_keeps_what_fits_and_halves_what_does_not():
    """A similar task's schedule on smaller loops: a split asking for more than its loop has is
    fitted (the largest length halved until the product fits), one that fits is kept as is."""
    from sketch.replay import fit_lengths
    from sketch.transform_steps import SplitStep

    step = SplitStep(stage_id=0, iter_id=0, extent=64, lengths=(16, 4), inner_to_outer=True)
    assert fit_lengths(64, step, None) == ((16, 4), step.tail)
    assert fit_lengths(8, step, None) == ((2, 4), step.tail)
    assert fit_lengths(5, step, None) == ((2, 2), step.tail)
    assert fit_lengths(1, step, None)[0] == (1, 1)
