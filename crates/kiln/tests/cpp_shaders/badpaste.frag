// expect: error
#version 450
#define JOIN(a, b) a##b
float x = JOIN(1, 2);
void main() {}
