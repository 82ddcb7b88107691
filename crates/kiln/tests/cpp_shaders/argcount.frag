// expect: error
#version 450
#define PAIR(a, b) a + b
int n = PAIR(1);
void main() {}
