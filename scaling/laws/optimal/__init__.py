"""The compute-optimal split of a budget C between parameters N and tokens D: from a law with
its intervals (`allocation`), without a parametric law (Hoffmann et al.'s Approaches 1 and 2,
`approaches`), and all of them beside each other and the published laws (`compare`)."""
