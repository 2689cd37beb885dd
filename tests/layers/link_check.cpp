// Linked with one layer's whole archive and the layers below it (see CMakeLists.txt): the
// link fails if that layer calls into a layer above it.
int main() {
  return 0;
}
