"""Result-neutral helpers shared by the algorithm files, and the tools around runs."""
