"""What a scaling law is: the Chinchilla form L(N, D) = E + A/N^alpha + B/D^beta and its
closed-form allocation (`law`), Kaplan et al.'s single-variable forms (`kaplan`), and the
published constants with their citations (`references`). Pure functions, no I/O."""
