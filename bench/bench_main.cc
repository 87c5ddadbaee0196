#include "frontend/fusebox.h"
int main() { return 0; }
