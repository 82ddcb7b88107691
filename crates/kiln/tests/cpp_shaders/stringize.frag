// expect: error
#version 450
#define NAME(x) #x
int n = NAME(abc);
void main() {}
