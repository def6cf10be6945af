// lingbot-map: the command-line tool (placeholder until the subcommands land).
#include <cstdio>
int main() { std::puts("lingbot-map"); return 0; }
